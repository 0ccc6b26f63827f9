// The ethdev behind a dpdk device name: ibex creates the vdev (memif with its role
// chosen by a lock file, af_packet with ring frames for the netdev's MTU, af_xdp, any
// other vdev), probes a PCI NIC, or takes an existing port; and removes what it created.
#pragma once

#include <cstdint>
#include <string>

#include <ibex/ibex.h>

#include "transport/soft/dpdk/device_spec.h"

namespace ibex::soft::dpdk {

// What attach_device() found out, kept by the port for its life.
struct Opened {
    uint16_t port_id = 0;
    std::string vdev_name; // non-empty: ibex created the vdev and removes it on close
    int netdev_mtu = 0;    // af_packet/af_xdp: the kernel netdev's MTU
    bool kernel_arp = false; // af_xdp with the RoCE-only XDP program: the kernel keeps ARP
    bool memif_server = false;
    uint32_t rx_slots = 0; // receive ring slots where the PMD's own (memif), else rxd
    int lock_fd = -1;      // memif server chosen by lock: held while the port lives
    std::string lock_path;
    std::string server_socket; // memif server: its socket file
    std::string server_bind_path; // memif server: the name it listens under until it has started
    std::string memif_socket;  // memif, either role: the socket's path
    uint32_t memif_reconnects = 0; // memif client: times it restarted while its link stayed down
};

// The name a memif server of this process listens under until its device has started
// ("<sock>.<pid>.<seq>.starting"; renamed to `sock` then).
std::string memif_starting_name(const std::string &sock, unsigned seq);
// Removes the names of that form for `sock` whose process is gone (a server killed
// between its probe and its start leaves one). Called by the server that holds the lock.
void remove_stale_starting_names(const std::string &sock);

// Creates (or finds) the ethdev `spec` names; fills *o. Errors are recorded (ibex::fail).
ibex_status_t attach_device(const DeviceSpec &spec, const std::string &device, Opened *o);

// Stops, closes and (if ibex created it) removes the device; takes ownership of `opened`,
// a heap-allocated Opened. Meant to run on EAL's interrupt thread (run_on_interrupt_thread).
void close_device(void *opened);

// The MTU and first IPv4 address (host order) of a netdev in the caller's namespace (0: none).
int netdev_mtu(const std::string &ifname);
uint32_t netdev_ipv4(const std::string &ifname);
// af_packet's ring frame for this MTU (a power of two); the mbufs must hold one whole.
uint32_t af_packet_frame(int mtu);

} // namespace ibex::soft::dpdk
