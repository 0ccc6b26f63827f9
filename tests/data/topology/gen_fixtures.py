#!/usr/bin/env python3
"""Writes the hand-designed hwloc 2.x XML fixtures of this folder.

The machines are described as trees (sockets, host bridges, PCIe switches, devices); this
script assigns bus numbers and emits XML in the layout `lstopo --of xml` writes, so hwloc
loads them exactly like an export of a real host. this_machine.xml is not written here: it
is `ibex_topo --export` run on the development VM.

    python3 gen_fixtures.py            # rewrites the fixtures next to this script
"""
import os

GEN4_X16 = 31.507692  # GB/s as hwloc computes it: 16 GT/s * 128/130 * 16 lanes / 8
GEN4_X4 = 7.876923
GEN2_X1 = 0.500000


def mask(bits):
    """hwloc bitmap string: 32-bit chunks, most significant first."""
    value = 0
    for b in bits:
        value |= 1 << b
    chunks = []
    while True:
        chunks.append(value & 0xFFFFFFFF)
        value >>= 32
        if not value:
            break
    return ",".join("0x%08x" % c for c in reversed(chunks))


class Bridge:
    def __init__(self, vendor, device, children, name=None):
        self.vendor, self.device, self.children, self.name = vendor, device, children, name


class Dev:
    def __init__(self, cls, vendor, device, infos=(), osdevs=(), width=16, speed=GEN4_X16, sub="0000:0000"):
        self.cls, self.vendor, self.device = cls, vendor, device
        self.infos, self.osdevs, self.width, self.speed, self.sub = list(infos), osdevs, width, speed, sub


class Writer:
    def __init__(self):
        self.lines = []
        self.gp = 0

    def gpi(self):
        self.gp += 1
        return self.gp

    def emit(self, depth, text):
        self.lines.append("  " * depth + text)

    def infos(self, depth, infos):
        for k, v in infos:
            self.emit(depth, '<info name="%s" value="%s"/>' % (k, v))


def switch(children, vendor="1000", device="c010"):
    """A PCIe switch: an upstream port with one downstream port per child."""
    return Bridge(vendor, device, [Bridge(vendor, device, [c]) for c in children])


def root_port(child, device="347a"):
    return Bridge("8086", device, [child])


def gpu(i, model, devid, bus_hint=None):
    return Dev("0302", "10de", devid,
               infos=[("PCIVendor", "NVIDIA Corporation"), ("PCIDevice", model), ("PCILinkWidth", "16")],
               osdevs=[("cuda%d" % i, "CUDA", 5, [("Backend", "CUDA"), ("GPUVendor", "NVIDIA Corporation"),
                                                  ("GPUModel", model)]),
                       ("nvml%d" % i, "NVML", 1, [("Backend", "NVML"), ("GPUVendor", "NVIDIA Corporation"),
                                                  ("GPUModel", model)])])


def nic(rdma, model, devid, cls="0200", netdev=True):
    # the netdev name depends on the bus number, filled in at layout time ("{bus}")
    osdevs = [(rdma, None, 3, [("NodeGUID", "b859:9f03:00%02x:%04x" % (int(rdma.split("_")[1]), 0xab10)),
                               ("SysImageGUID", "b859:9f03:00%02x:ab10" % int(rdma.split("_")[1])),
                               ("Port1State", "4"), ("Port1LID", "0x0"), ("Port1LMC", "0")])]
    if netdev:
        osdevs.insert(0, ("enp{bus}s0np0", None, 2, [("Address", "b8:59:9f:00:{bus:02x}:00"), ("Port", "1")]))
    return Dev(cls, "15b3", devid,
               infos=[("PCIVendor", "Mellanox Technologies"), ("PCIDevice", model), ("PCILinkWidth", "16")],
               osdevs=osdevs)


def nvme(n):
    return Dev("0108", "144d", "a80a", infos=[("PCIVendor", "Samsung Electronics Co Ltd"),
                                             ("PCIDevice", "NVMe SSD Controller PM9A3"), ("PCILinkWidth", "4")],
               osdevs=[("nvme%dn1" % n, "Disk", 0, [("Size", "3750738264"), ("SectorSize", "512")])],
               width=4, speed=GEN4_X4)


def aspeed():
    return Bridge("1a03", "1150", [Dev("0300", "1a03", "2000",
                                       infos=[("PCIVendor", "ASPEED Technology, Inc."),
                                              ("PCIDevice", "ASPEED Graphics Family"), ("PCILinkWidth", "1")],
                                       width=1, speed=GEN2_X1)])


def ati_es1000():
    """The BMC graphics of many servers: an AMD (ATI) VGA function with only DRM nodes."""
    return Bridge("1a03", "1150", [Dev("0300", "1002", "515e",
                                       infos=[("PCIVendor", "Advanced Micro Devices, Inc. [AMD/ATI]"),
                                              ("PCIDevice", "ES1000"), ("PCILinkWidth", "1")],
                                       osdevs=[("card0", None, 1, []), ("controlD64", None, 1, [])],
                                       width=1, speed=GEN2_X1)])


def amd_instinct(i):
    """An AMD Instinct GPU that shows as a display controller (0380); RSMI and OpenCL name it."""
    model = "AMD Instinct MI210"
    return Dev("0380", "1002", "740f",
               infos=[("PCIVendor", "Advanced Micro Devices, Inc. [AMD/ATI]"), ("PCIDevice", model),
                      ("PCILinkWidth", "16")],
               osdevs=[("card%d" % (i + 1), None, 1, []),
                       ("rsmi%d" % i, "RSMI", 1, [("Backend", "RSMI"), ("GPUVendor", "AMD"), ("GPUModel", model)]),
                       ("opencl0d%d" % i, "OpenCL", 5, [("Backend", "OpenCL"), ("GPUModel", model)])])


def nvidia_without_driver():
    """An NVIDIA 3D controller (0302) with no OS device: the driver was not loaded."""
    return Dev("0302", "10de", "2330", infos=[("PCIVendor", "NVIDIA Corporation"),
                                             ("PCIDevice", "NVIDIA H100 80GB HBM3"), ("PCILinkWidth", "16")])


class HostBridge:
    def __init__(self, root_bus, children):
        self.root_bus, self.children = root_bus, children


def write_pci(w, depth, hb):
    next_bus = [hb.root_bus + 1]
    out = []

    def layout(children, bus, level):
        """Returns (xml lines, subordinate bus) for children sitting on `bus`."""
        lines = []
        for slot, c in enumerate(children):
            busid = "0000:%02x:%02x.0" % (bus, slot if level == 0 else slot)
            if isinstance(c, Bridge):
                sec = next_bus[0]
                next_bus[0] += 1
                inner = layout(c.children, sec, level + 1)
                sub = next_bus[0] - 1
                lines.append(("open", level, '<object type="Bridge" gp_index="%d" bridge_type="1-1" depth="%d" '
                              'bridge_pci="0000:[%02x-%02x]" pci_busid="%s" pci_type="0604 [%s:%s] [0000:0000] 00" '
                              'pci_link_speed="%f">' % (w.gpi(), level + 1, sec, sub, busid, c.vendor, c.device,
                                                        GEN4_X16)))
                lines.extend(inner)
                lines.append(("close", level, "</object>"))
            else:
                lines.append(("open", level, '<object type="PCIDev" gp_index="%d" pci_busid="%s" '
                              'pci_type="%s [%s:%s] [%s] 00" pci_link_speed="%f">'
                              % (w.gpi(), busid, c.cls, c.vendor, c.device, c.sub, c.speed)))
                for k, v in c.infos:
                    lines.append(("leaf", level + 1, '<info name="%s" value="%s"/>' % (k, v)))
                for name, subtype, ostype, infos in c.osdevs:
                    name = name.format(bus=bus)
                    st = ' subtype="%s"' % subtype if subtype else ""
                    lines.append(("open", level + 1, '<object type="OSDev" gp_index="%d" name="%s"%s osdev_type="%d">'
                                  % (w.gpi(), name, st, ostype)))
                    for k, v in infos:
                        lines.append(("leaf", level + 2, '<info name="%s" value="%s"/>' % (k, v.format(bus=bus))))
                    lines.append(("close", level + 1, "</object>"))
                lines.append(("close", level, "</object>"))
        return lines

    inner = layout(hb.children, hb.root_bus, 0)
    w.emit(depth, '<object type="Bridge" gp_index="%d" bridge_type="0-1" depth="0" bridge_pci="0000:[%02x-%02x]">'
           % (w.gpi(), hb.root_bus, next_bus[0] - 1))
    for _, level, text in inner:
        w.emit(depth + 1 + level, text)
    w.emit(depth, "</object>")


def machine(host, sockets, cores_per_socket, smt, machine_io=(), model="Intel(R) Xeon(R) Platinum 8480+"):
    """sockets: list of lists of HostBridge attached to each package."""
    w = Writer()
    nsock = len(sockets)
    npu = nsock * cores_per_socket * smt
    all_pus = range(npu)
    nodes = range(nsock)

    def pus_of(s):
        base = s * cores_per_socket
        return [base + c + t * nsock * cores_per_socket for t in range(smt) for c in range(cores_per_socket)]

    w.emit(0, '<?xml version="1.0" encoding="UTF-8"?>')
    w.emit(0, '<!DOCTYPE topology SYSTEM "hwloc2.dtd">')
    w.emit(0, '<topology version="2.0">')
    cs, ns = mask(all_pus), mask(nodes)
    w.emit(1, '<object type="Machine" os_index="0" cpuset="%s" complete_cpuset="%s" allowed_cpuset="%s" '
           'nodeset="%s" complete_nodeset="%s" allowed_nodeset="%s" gp_index="%d">' % (cs, cs, cs, ns, ns, ns, w.gpi()))
    w.infos(2, [("Backend", "Linux"), ("OSName", "Linux"), ("HostName", host), ("Architecture", "x86_64"),
                ("hwlocVersion", "2.9.0")])
    for s, bridges in enumerate(sockets):
        scs, sns = mask(pus_of(s)), mask([s])
        w.emit(2, '<object type="Package" os_index="%d" cpuset="%s" complete_cpuset="%s" nodeset="%s" '
               'complete_nodeset="%s" gp_index="%d">' % (s, scs, scs, sns, sns, w.gpi()))
        w.infos(3, [("CPUVendor", "GenuineIntel"), ("CPUModel", model)])
        w.emit(3, '<object type="NUMANode" os_index="%d" cpuset="%s" complete_cpuset="%s" nodeset="%s" '
               'complete_nodeset="%s" gp_index="%d" local_memory="%d"/>'
               % (s, scs, scs, sns, sns, w.gpi(), 1024 ** 4 // 2))
        for c in range(cores_per_socket):
            pus = [s * cores_per_socket + c + t * nsock * cores_per_socket for t in range(smt)]
            ccs = mask(pus)
            w.emit(3, '<object type="Core" os_index="%d" cpuset="%s" complete_cpuset="%s" nodeset="%s" '
                   'complete_nodeset="%s" gp_index="%d">' % (c, ccs, ccs, sns, sns, w.gpi()))
            for p in pus:
                pcs = mask([p])
                w.emit(4, '<object type="PU" os_index="%d" cpuset="%s" complete_cpuset="%s" nodeset="%s" '
                       'complete_nodeset="%s" gp_index="%d"/>' % (p, pcs, pcs, sns, sns, w.gpi()))
            w.emit(3, "</object>")
        for hb in bridges:
            write_pci(w, 3, hb)
        w.emit(2, "</object>")
    for hb in machine_io:
        write_pci(w, 2, hb)
    w.emit(1, "</object>")
    w.emit(0, "</topology>")
    return "\n".join(w.lines) + "\n"


def dgx_like():
    """2 sockets, 8 A100s, 4 ConnectX-6 (RoCE). Each NIC shares a second-level switch with
    one GPU (PIX); the other GPU of the pair sits under a sibling switch (PXB). Socket 0 has
    both switch trees under one host bridge (PHB between them); socket 1 has one host
    bridge per tree (NODE between them)."""
    a100 = "NVIDIA A100-SXM4-80GB"

    def tree(g, n, disk):
        return root_port(switch([switch([gpu(g, a100, "20b2"), nic("mlx5_%d" % n, "MT28908 Family [ConnectX-6]", "101b")]),
                                 switch([gpu(g + 1, a100, "20b2"), nvme(disk)])]))

    s0 = [HostBridge(0x00, [aspeed(), tree(0, 0, 0), tree(2, 1, 1)])]
    s1 = [HostBridge(0x80, [tree(4, 2, 2)]), HostBridge(0xc0, [tree(6, 3, 3)])]
    return machine("dgx-like", [s0, s1], cores_per_socket=8, smt=2)


def single_nic():
    """1 socket, 2 GPUs, 1 ConnectX-5: GPU0 shares the NIC's host bridge (PHB), GPU1 is
    under a second host bridge (NODE). The ASPEED BMC display must not count as a GPU."""
    a10 = "NVIDIA A10"
    s0 = [HostBridge(0x00, [aspeed(), root_port(gpu(0, a10, "2236")),
                            root_port(nic("mlx5_0", "MT27800 Family [ConnectX-5]", "1017"))]),
          HostBridge(0x40, [root_port(gpu(1, a10, "2236"))])]
    return machine("single-nic", [s0], cores_per_socket=8, smt=2, model="AMD EPYC 7313P 16-Core Processor")


def numa_unknown():
    """2 sockets; the second host bridge's sysfs numa_node is -1, so hwloc attaches it to the
    Machine instead of a package: its NIC and GPU have no known NUMA node."""
    h100 = "NVIDIA H100 80GB HBM3"
    s0 = [HostBridge(0x00, [root_port(switch([gpu(0, h100, "2330"),
                                               nic("mlx5_0", "MT2910 Family [ConnectX-7]", "1021")]))])]
    s1 = []
    machine_io = [HostBridge(0x80, [root_port(gpu(1, h100, "2330")),
                                    root_port(nic("mlx5_1", "MT2910 Family [ConnectX-7]", "1021"))])]
    return machine("numa-unknown", [s0, s1], cores_per_socket=8, smt=1, machine_io=machine_io)


def onboard_vga():
    """1 socket: an ATI ES1000 BMC VGA (class 0300, AMD vendor, DRM nodes only) next to an
    A100 (CUDA), an AMD Instinct (0380, RSMI/OpenCL) and an H100 without its driver (0302).
    Only the last three are GPUs."""
    s0 = [HostBridge(0x00, [ati_es1000(), root_port(gpu(0, "NVIDIA A100-SXM4-80GB", "20b2")),
                            root_port(amd_instinct(0)), root_port(nvidia_without_driver()),
                            root_port(nic("mlx5_0", "MT28908 Family [ConnectX-6]", "101b"))])]
    return machine("onboard-vga", [s0], cores_per_socket=8, smt=1)


def no_nic():
    """1 socket, 1 GPU, no network function: nothing for a rail to bind to."""
    s0 = [HostBridge(0x00, [root_port(gpu(0, "NVIDIA L4", "27b8"))])]
    return machine("no-nic", [s0], cores_per_socket=4, smt=1)


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    for name, text in [("dgx_like.xml", dgx_like()), ("single_nic.xml", single_nic()),
                       ("numa_unknown.xml", numa_unknown()), ("onboard_vga.xml", onboard_vga()),
                       ("no_nic.xml", no_nic())]:
        with open(os.path.join(here, name), "w") as f:
            f.write(text)
