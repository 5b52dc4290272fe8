"""ApiVersions: tell the client exactly which API versions this broker serves."""

from __future__ import annotations

from sparklog.broker.dispatch import RequestContext, api_spec, api_versions_list, register
from sparklog.protocol.api_keys import ApiKey
from sparklog.protocol.errors import ErrorCode
from sparklog.protocol.schema import TopLevel


@register(ApiKey.API_VERSIONS, 0, 3)
async def handle_api_versions(ctx: RequestContext, request: TopLevel) -> TopLevel:
    spec = api_spec(ApiKey.API_VERSIONS)
    # Tagged fields (v3+) are left at their defaults so none are written: librdkafka 2.0.2
    # cannot skip them (research note, Tansu finding #1).
    return spec.response(error_code=int(ErrorCode.NONE), api_keys=api_versions_list(spec),
                         throttle_time_ms=0)
