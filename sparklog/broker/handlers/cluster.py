"""DescribeCluster: brokers and controller without topic metadata."""

from __future__ import annotations

from sparklog.broker.dispatch import RequestContext, api_spec, register
from sparklog.protocol.api_keys import ApiKey
from sparklog.protocol.errors import ErrorCode
from sparklog.protocol.schema import TopLevel


@register(ApiKey.DESCRIBE_CLUSTER, 0, 2)
async def handle_describe_cluster(ctx: RequestContext, request: TopLevel) -> TopLevel:
    spec = api_spec(ApiKey.DESCRIBE_CLUSTER)
    resp = spec.response
    endpoint_type = request.endpoint_type
    if endpoint_type != 1:  # 1 = brokers; 2 = controllers (KIP-919), not served here
        return resp(error_code=int(ErrorCode.UNSUPPORTED_ENDPOINT_TYPE),
                    error_message="only broker endpoints are served", endpoint_type=endpoint_type,
                    cluster_id=ctx.broker.metadata.cluster_id)
    md = ctx.broker.metadata
    # v2 (KIP-1073): registered brokers that are fenced too, when asked, marked as such
    with_fenced = ctx.api_version >= 2 and request.include_fenced_brokers
    brokers = [resp.DescribeClusterBroker(broker_id=b.node_id, host=b.host, port=b.port,
                                          rack=b.rack, is_fenced=b.node_id not in md.live_brokers)
               for _, b in sorted(md.image.brokers.items())
               if with_fenced or b.node_id in md.live_brokers]
    return resp(throttle_time_ms=0, error_code=0, endpoint_type=1, cluster_id=md.cluster_id,
                controller_id=ctx.broker.controller_node_id, brokers=brokers)
