# Sourced by the benchmarks that stand "hosts" up on this machine: network namespaces, each
# with a veth on one bridge whose egress tc (tbf) shapes to a link rate. Needs root.
#
# shaped_hosts_up BRIDGE NS_PREFIX OUTER_PREFIX INNER_PREFIX COUNT NET RATE BURST
#   host h: namespace NS_PREFIXh; veth INNER_PREFIXh inside it with address NET.(h+1)/24,
#   its peer OUTER_PREFIXh on BRIDGE; lo up.
# shaped_hosts_down BRIDGE NS_PREFIX COUNT
shaped_hosts_up() {
    local br=$1 nsp=$2 outer=$3 inner=$4 count=$5 net=$6 rate=$7 burst=$8 h
    ip link add "$br" type bridge
    ip link set "$br" up
    for ((h = 0; h < count; h++)); do
        ip netns add "$nsp$h"
        ip link add "$outer$h" type veth peer name "$inner$h"
        ip link set "$inner$h" netns "$nsp$h"
        ip link set "$outer$h" master "$br"
        ip link set "$outer$h" up
        ip -n "$nsp$h" addr add "$net.$((h + 1))/24" dev "$inner$h"
        ip -n "$nsp$h" link set "$inner$h" up
        ip -n "$nsp$h" link set lo up
        # The host's link: its egress limited to the rate (the other direction is the peers' egress).
        ip netns exec "$nsp$h" tc qdisc add dev "$inner$h" root tbf rate "$rate" burst "$burst" latency 100ms
    done
}

shaped_hosts_down() {
    local h
    for ((h = 0; h < $3; h++)); do ip netns del "$2$h" 2>/dev/null || true; done
    ip link del "$1" 2>/dev/null || true
}
