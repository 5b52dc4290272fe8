"""ApiVersions (key 18): which APIs and versions the broker serves.

Every client sends it first on a new connection.  An unsupported (too new) request
version is answered in v0 layout with UNSUPPORTED_VERSION plus the full list (KIP-511),
and the response header is always v0, even for flexible versions.
"""

from sparklog.protocol.schema import api, f, schema

# ApiVersions
#   v0  error code + (api key, min, max) list
#   v1  response adds throttle_time_ms
#   v2  same layout (the broker may throttle this API too)
#   v3  flexible; the request names the client software (KIP-511); the response may
#       carry feature flags as tagged fields (KIP-584)
#   v4  same layout; a supported feature may now have min_version 0 (KAFKA-17011)
API_VERSIONS = api(
    18, "ApiVersions", versions=(0, 4), flexible=3,
    request=schema("ApiVersionsRequest", [
        f("client_software_name", "string", "3+"),
        f("client_software_version", "string", "3+"),
    ]),
    response=schema("ApiVersionsResponse", [
        f("error_code", "int16"),
        f("api_keys", "[]ApiVersion", fields=[
            f("api_key", "int16"),
            f("min_version", "int16"),
            f("max_version", "int16"),
        ]),
        f("throttle_time_ms", "int32", "1+"),
        f("supported_features", "[]SupportedFeatureKey", "3+", tag=0, fields=[
            f("name", "string", "3+"),
            f("min_version", "int16", "3+"),
            f("max_version", "int16", "3+"),
        ]),
        f("finalized_features_epoch", "int64", "3+", default=-1, tag=1),
        f("finalized_features", "[]FinalizedFeatureKey", "3+", tag=2, fields=[
            f("name", "string", "3+"),
            f("max_version_level", "int16", "3+"),
            f("min_version_level", "int16", "3+"),
        ]),
        f("zk_migration_ready", "bool", "3+", tag=3),
    ]),
)
ApiVersionsRequest = API_VERSIONS.request
ApiVersionsResponse = API_VERSIONS.response
