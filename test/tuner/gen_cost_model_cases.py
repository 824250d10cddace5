#!/usr/bin/env python3
"""Generates test/tuner/cost_model_cases.txt: expected collCostTable cells from the Python
reference model for a set of topologies, collectives, sizes and numPipeOps. The C++ cost model
(model/cost_model.cc) must reproduce every cell. The reference is an independent Python
re-implementation of NCCL 2.28.9's cost model (the model is described in docs/nccl-cost-model.md);
it lies beside the checkout, as ../shared/docs/nccl_cost_model.py.

usage: gen_cost_model_cases.py PATH/TO/nccl_cost_model.py > cost_model_cases.txt
The cost_model_reference CTest regenerates the file and compares it with the checked-in copy.
"""
import importlib.util
import sys

spec = importlib.util.spec_from_file_location("ref", sys.argv[1])
ref = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ref)

OFF = dict(nCh=0, bwIntra=0.0, bwInter=0.0, typeIntraNVL=True, typeIntra=1, typeInter=4)


def g(nCh, bwIntra, bwInter, nvl=True, typeInter=4, **kw):
    d = dict(nCh=nCh, bwIntra=bwIntra, bwInter=bwInter, typeIntraNVL=nvl,
             typeIntra=1 if nvl else kw.pop("typeIntra", 0), typeInter=typeInter, latencyInter=0.0)
    d.update(kw)
    return d


def graphs(ring, tree=None, nvls=None, collnet=None, pat=None):
    tree = tree or ring
    return {"Tree": tree, "Ring": ring, "CollNetDirect": collnet or OFF,
            "CollNetChain": collnet or OFF, "NVLS": nvls or OFF, "NVLSTree": nvls or OFF,
            "PAT": pat or tree}


TOPOS = {}
# 4 nodes x 8 H100, 8x400G IB, NVLS, plain TREE pattern (the worked example, doc section 9).
h100_ring = g(8, 48.0, 48.0)
h100_nvls = g(8, 40.0, 48.0)
base = dict(nRanks=32, nNodes=4, cc=90, cpuVendor="intel", cpuArch="x86", commNChannels=16,
            nvlsChannels=16, maxTreePattern="TREE", collnetEnable=False)
TOPOS["h100_4x8"] = (base, graphs(h100_ring, nvls=h100_nvls))
TOPOS["h100_4x8_balanced"] = (dict(base, maxTreePattern="BALANCED_TREE"), graphs(h100_ring, nvls=h100_nvls))
TOPOS["h100_4x8_nonvls"] = (base, graphs(h100_ring))
TOPOS["h100_4x8_amd"] = (dict(base, cpuVendor="amd"), graphs(h100_ring, nvls=h100_nvls))
# N nodes x 1 H100 x 1 NIC (doc section 10): PAT is available.
for n in (2, 4, 16):
    TOPOS["h100_%dx1" % n] = (
        dict(nRanks=n, nNodes=n, cc=90, cpuVendor="intel", cpuArch="x86", commNChannels=4,
             nvlsChannels=0, maxTreePattern="TREE", collnetEnable=False),
        graphs(g(2, 24.0, 24.0, nvl=False), tree=g(2, 48.0, 24.0, nvl=False)))
# Single-node A100 NVSwitch (no NVLS before Hopper).
TOPOS["a100_1x8"] = (
    dict(nRanks=8, nNodes=1, cc=80, cpuVendor="amd", cpuArch="x86", commNChannels=24,
         nvlsChannels=0, maxTreePattern="BALANCED_TREE"),
    graphs(g(12, 20.0, 20.0)))
# Single-node PCIe (L40S-like): PCI latency row, LL128 disabled by the path type.
TOPOS["l40s_1x4"] = (
    dict(nRanks=4, nNodes=1, cc=89, cpuVendor="intel", cpuArch="x86", commNChannels=2,
         nvlsChannels=0, maxTreePattern="BALANCED_TREE"),
    graphs(g(1, 24.0, 24.0, nvl=False, typeIntra=8, typeInter=8)))
# Single-node B300: NVLS on Blackwell.
TOPOS["b300_1x8"] = (
    dict(nRanks=8, nNodes=1, cc=100, cpuVendor="amd", cpuArch="x86", commNChannels=32,
         nvlsChannels=24, maxTreePattern="BALANCED_TREE"),
    graphs(g(16, 40.0, 40.0), nvls=g(8, 80.0, 80.0)))
# 2 nodes x 8 with CollNet (SHARP), Power CPU, explicit net overhead, NIC latency, unequal channels.
TOPOS["collnet_2x8_power"] = (
    dict(nRanks=16, nNodes=2, cc=90, cpuVendor="other", cpuArch="power", netOverheadNs=1500,
         commNChannels=16, nvlsChannels=16, maxTreePattern="BALANCED_TREE", collnetEnable=True,
         collnetAGRS=True),
    graphs(g(8, 40.0, 24.0, latencyInter=2.0, sameChannels=0), nvls=g(8, 40.0, 48.0),
           collnet=g(4, 30.0, 25.0, latencyInter=2.0)))
# Volta, mixed CPU vendors, heterogeneous GPUs (LL128 off), 3 nodes x 2.
TOPOS["volta_3x2_mixed"] = (
    dict(nRanks=6, nNodes=3, cc=70, cpuVendor="mixed", cpuArch="x86", commNChannels=4,
         nvlsChannels=0, maxTreePattern="BALANCED_TREE", homogeneousCC=False),
    graphs(g(2, 20.0, 12.0, typeInter=5)))
# 2 nodes x 4 Blackwell, CollNet on without AllGather/ReduceScatter support, NVLS multi-node.
TOPOS["b200_2x4_collnet"] = (
    dict(nRanks=8, nNodes=2, cc=100, cpuVendor="intel", cpuArch="arm", commNChannels=8,
         nvlsChannels=32, maxTreePattern="BALANCED_TREE", collnetEnable=True, collnetAGRS=False,
         hasNVSwitch=False, netDeviceHost=False),
    graphs(g(4, 50.0, 50.0, typeInter=7), nvls=g(4, 100.0, 50.0, typeInter=7),
           collnet=g(2, 40.0, 50.0)))

SIZES = [1, 63, 64, 100, 4096, 65536, 1 << 20, (1 << 20) + 1, 16 << 20, 256 << 20, 512 << 20,
         4 << 30, 16 << 30]
PIPES = [1, 3, 11, 25]
GRAPH_KEYS = ["nCh", "bwIntra", "bwInter", "typeIntra", "typeInter", "latencyInter", "sameChannels"]
COMM_KEYS = ["nRanks", "nNodes", "cc", "cpuVendor", "cpuArch", "netOverheadNs", "commNChannels",
             "nvlsChannels", "maxTreePattern", "collnetEnable", "collnetAGRS", "hasNVSwitch",
             "homogeneousCC", "netDeviceHost"]

print("# generated by test/tuner/gen_cost_model_cases.py from ../shared/docs/nccl_cost_model.py")
print("# (an independent Python re-implementation of NCCL's cost model, docs/nccl-cost-model.md)")
print("# topo NAME key=value...; graph NAME ALGO key=value...;")
print("# case TOPO FUNC NBYTES NUMPIPEOPS then 21 cells (algo-major), x = never computed (IGNORE)")
for name, (comm, gr) in TOPOS.items():
    print("topo %s %s" % (name, " ".join("%s=%s" % (k, comm[k]) for k in COMM_KEYS if k in comm)))
    for a in ref.ALGOS:
        gi = gr[a]
        assert gi["typeIntraNVL"] == (gi["typeIntra"] == 1)
        print("graph %s %s %s" % (name, a, " ".join("%s=%r" % (k, gi[k]) for k in GRAPH_KEYS if k in gi)))
    bw, lat = ref.tune_model(comm, gr)
    for ci, coll in enumerate(ref.COLLS):
        for s in SIZES:
            for pipe in PIPES:
                cells = []
                for a in ref.ALGOS:
                    for p in ref.PROTOS:
                        t = ref.algo_time(comm, bw, lat, coll, a, p, s, pipe)
                        cells.append("x" if t is None else repr(float(t)))
                print("case %s %d %d %d %s" % (name, ci, s, pipe, " ".join(cells)))
