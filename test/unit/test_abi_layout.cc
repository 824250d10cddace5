// Layout of every struct of every ABI version we export, against the sizes and offsets in
// NCCL's headers (LP64; docs/nccl-plugin-abi.md). A mismatch fails the build, not just the test.
#include <catch2/catch.hpp>
#include <cstddef>

#include "common/abi/net_abi.h"
#include "common/abi/profiler_abi.h"
#include "common/abi/tuner_abi.h"

using namespace autopilot::abi;

#define AP_OFFSET(type, member, value) \
  static_assert(offsetof(type, member) == (value), #type "." #member)

// ---- common
static_assert(sizeof(Result) == 4 && sizeof(Func) == 4 && sizeof(LogLevel) == 4);
static_assert(kNumAlgorithms == 7 && kNumProtocols == 3);
static_assert(kAlgoTree == 0 && kAlgoRing == 1 && kAlgoCollNetDirect == 2 &&
              kAlgoCollNetChain == 3 && kAlgoNvls == 4 && kAlgoNvlsTree == 5 && kAlgoPat == 6);
static_assert(kProtoLL == 0 && kProtoLL128 == 1 && kProtoSimple == 2);

// ---- tuner
static_assert(sizeof(NvlDomainInfoV5) == 12);
static_assert(sizeof(TunerConstantsV5) == 1152);
AP_OFFSET(TunerConstantsV5, baseLatencies, 0);
AP_OFFSET(TunerConstantsV5, hwLatencies, 168);
AP_OFFSET(TunerConstantsV5, llMaxBws, 672);
AP_OFFSET(TunerConstantsV5, perChMaxRingLL128Bws, 768);
AP_OFFSET(TunerConstantsV5, perChMaxTreeLL128Bws, 864);
AP_OFFSET(TunerConstantsV5, perChMaxTreeBws, 960);
AP_OFFSET(TunerConstantsV5, perChMaxNVLSTreeBws, 1056);
static_assert(sizeof(TunerV5) == 32 && sizeof(TunerV4) == 32 && sizeof(TunerV3) == 32);
AP_OFFSET(TunerV5, init, 8);
AP_OFFSET(TunerV5, getCollInfo, 16);
AP_OFFSET(TunerV5, finalize, 24);
AP_OFFSET(TunerV4, getCollInfo, 16);
AP_OFFSET(TunerV4, destroy, 24);
AP_OFFSET(TunerV3, getCollInfo, 16);
AP_OFFSET(TunerV3, destroy, 24);

// ---- profiler v5
static_assert(sizeof(ProfilerEventDescrV5) == 112 && alignof(ProfilerEventDescrV5) == 8);
AP_OFFSET(ProfilerEventDescrV5, type, 0);
AP_OFFSET(ProfilerEventDescrV5, parentObj, 8);
AP_OFFSET(ProfilerEventDescrV5, rank, 16);
AP_OFFSET(ProfilerEventDescrV5, groupApi.graphCaptured, 24);
AP_OFFSET(ProfilerEventDescrV5, groupApi.groupDepth, 28);
AP_OFFSET(ProfilerEventDescrV5, collApi.func, 24);
AP_OFFSET(ProfilerEventDescrV5, collApi.count, 32);
AP_OFFSET(ProfilerEventDescrV5, collApi.datatype, 40);
AP_OFFSET(ProfilerEventDescrV5, collApi.root, 48);
AP_OFFSET(ProfilerEventDescrV5, collApi.stream, 56);
AP_OFFSET(ProfilerEventDescrV5, collApi.graphCaptured, 64);
AP_OFFSET(ProfilerEventDescrV5, p2pApi.func, 24);
AP_OFFSET(ProfilerEventDescrV5, p2pApi.count, 32);
AP_OFFSET(ProfilerEventDescrV5, p2pApi.datatype, 40);
AP_OFFSET(ProfilerEventDescrV5, p2pApi.stream, 48);
AP_OFFSET(ProfilerEventDescrV5, p2pApi.graphCaptured, 56);
AP_OFFSET(ProfilerEventDescrV5, kernelLaunch.stream, 24);
AP_OFFSET(ProfilerEventDescrV5, coll.seqNumber, 24);
AP_OFFSET(ProfilerEventDescrV5, coll.func, 32);
AP_OFFSET(ProfilerEventDescrV5, coll.sendBuff, 40);
AP_OFFSET(ProfilerEventDescrV5, coll.recvBuff, 48);
AP_OFFSET(ProfilerEventDescrV5, coll.count, 56);
AP_OFFSET(ProfilerEventDescrV5, coll.root, 64);
AP_OFFSET(ProfilerEventDescrV5, coll.datatype, 72);
AP_OFFSET(ProfilerEventDescrV5, coll.nChannels, 80);
AP_OFFSET(ProfilerEventDescrV5, coll.nWarps, 81);
AP_OFFSET(ProfilerEventDescrV5, coll.algo, 88);
AP_OFFSET(ProfilerEventDescrV5, coll.proto, 96);
AP_OFFSET(ProfilerEventDescrV5, coll.parentGroup, 104);
AP_OFFSET(ProfilerEventDescrV5, p2p.func, 24);
AP_OFFSET(ProfilerEventDescrV5, p2p.buff, 32);
AP_OFFSET(ProfilerEventDescrV5, p2p.datatype, 40);
AP_OFFSET(ProfilerEventDescrV5, p2p.count, 48);
AP_OFFSET(ProfilerEventDescrV5, p2p.peer, 56);
AP_OFFSET(ProfilerEventDescrV5, p2p.nChannels, 60);
AP_OFFSET(ProfilerEventDescrV5, p2p.parentGroup, 64);
AP_OFFSET(ProfilerEventDescrV5, proxyOp.pid, 24);
AP_OFFSET(ProfilerEventDescrV5, proxyOp.channelId, 28);
AP_OFFSET(ProfilerEventDescrV5, proxyOp.peer, 32);
AP_OFFSET(ProfilerEventDescrV5, proxyOp.nSteps, 36);
AP_OFFSET(ProfilerEventDescrV5, proxyOp.chunkSize, 40);
AP_OFFSET(ProfilerEventDescrV5, proxyOp.isSend, 44);
AP_OFFSET(ProfilerEventDescrV5, proxyStep.step, 24);
AP_OFFSET(ProfilerEventDescrV5, kernelCh.channelId, 24);
AP_OFFSET(ProfilerEventDescrV5, kernelCh.pTimer, 32);
AP_OFFSET(ProfilerEventDescrV5, netPlugin.id, 24);
AP_OFFSET(ProfilerEventDescrV5, netPlugin.data, 32);
static_assert(sizeof(ProfilerEventStateArgsV5) == 8);
static_assert(sizeof(ProfilerV5) == 48);
AP_OFFSET(ProfilerV5, init, 8);
AP_OFFSET(ProfilerV5, startEvent, 16);
AP_OFFSET(ProfilerV5, stopEvent, 24);
AP_OFFSET(ProfilerV5, recordEventState, 32);
AP_OFFSET(ProfilerV5, finalize, 40);

// ---- profiler v4
static_assert(sizeof(ProfilerEventDescrV4) == 104);
AP_OFFSET(ProfilerEventDescrV4, type, 0);
AP_OFFSET(ProfilerEventDescrV4, parentObj, 8);
AP_OFFSET(ProfilerEventDescrV4, rank, 16);
AP_OFFSET(ProfilerEventDescrV4, coll.seqNumber, 24);
AP_OFFSET(ProfilerEventDescrV4, coll.nChannels, 80);
AP_OFFSET(ProfilerEventDescrV4, coll.nWarps, 81);
AP_OFFSET(ProfilerEventDescrV4, coll.algo, 88);
AP_OFFSET(ProfilerEventDescrV4, coll.proto, 96);
AP_OFFSET(ProfilerEventDescrV4, p2p.peer, 56);
AP_OFFSET(ProfilerEventDescrV4, p2p.nChannels, 60);
AP_OFFSET(ProfilerEventDescrV4, proxyOp.pid, 24);
AP_OFFSET(ProfilerEventDescrV4, proxyOp.isSend, 44);
AP_OFFSET(ProfilerEventDescrV4, kernelCh.pTimer, 32);
AP_OFFSET(ProfilerEventDescrV4, netPlugin.data, 32);
static_assert(sizeof(ProfilerEventStateArgsV4) == 8);
static_assert(sizeof(ProfilerV4) == 48);

// ---- net-plugin event payloads
static_assert(sizeof(ProfilerNetIbDescrV1) == 40);
AP_OFFSET(ProfilerNetIbDescrV1, qp.device, 8);
AP_OFFSET(ProfilerNetIbDescrV1, qp.wr_id, 16);
AP_OFFSET(ProfilerNetIbDescrV1, qp.opcode, 24);
AP_OFFSET(ProfilerNetIbDescrV1, qp.qpNum, 28);
AP_OFFSET(ProfilerNetIbDescrV1, qp.length, 32);
static_assert(sizeof(ProfilerNetSockDescrV1) == 24);
AP_OFFSET(ProfilerNetSockDescrV1, sock.fd, 8);
AP_OFFSET(ProfilerNetSockDescrV1, sock.op, 12);
AP_OFFSET(ProfilerNetSockDescrV1, sock.length, 16);

// ---- net auxiliary structs
static_assert(sizeof(NetVDevicePropsV11) == 20);
static_assert(sizeof(NetCommConfigV11) == 4);
static_assert(sizeof(NetCommAttrV11) == 16);
static_assert(sizeof(NetAttrV11) == 44);
AP_OFFSET(NetAttrV11, recvCommAttr, 16);
AP_OFFSET(NetAttrV11, op, 32);
AP_OFFSET(NetAttrV11, algo, 36);
AP_OFFSET(NetAttrV11, proto, 40);
static_assert(sizeof(NetDeviceHandleV11) == 32);
AP_OFFSET(NetDeviceHandleV11, netDeviceVersion, 4);
AP_OFFSET(NetDeviceHandleV11, handle, 8);
AP_OFFSET(NetDeviceHandleV11, size, 16);
AP_OFFSET(NetDeviceHandleV11, needsProxyProgress, 24);

// ---- net properties
static_assert(sizeof(NetPropertiesV11) == 112);
AP_OFFSET(NetPropertiesV11, name, 0);
AP_OFFSET(NetPropertiesV11, pciPath, 8);
AP_OFFSET(NetPropertiesV11, guid, 16);
AP_OFFSET(NetPropertiesV11, ptrSupport, 24);
AP_OFFSET(NetPropertiesV11, regIsGlobal, 28);
AP_OFFSET(NetPropertiesV11, forceFlush, 32);
AP_OFFSET(NetPropertiesV11, speed, 36);
AP_OFFSET(NetPropertiesV11, port, 40);
AP_OFFSET(NetPropertiesV11, latency, 44);
AP_OFFSET(NetPropertiesV11, maxComms, 48);
AP_OFFSET(NetPropertiesV11, maxRecvs, 52);
AP_OFFSET(NetPropertiesV11, netDeviceType, 56);
AP_OFFSET(NetPropertiesV11, netDeviceVersion, 60);
AP_OFFSET(NetPropertiesV11, vProps, 64);
AP_OFFSET(NetPropertiesV11, maxP2pBytes, 88);
AP_OFFSET(NetPropertiesV11, maxCollBytes, 96);
AP_OFFSET(NetPropertiesV11, maxMultiRequestSize, 104);
static_assert(sizeof(NetPropertiesV10) == 104);
AP_OFFSET(NetPropertiesV10, vProps, 64);
AP_OFFSET(NetPropertiesV10, maxP2pBytes, 88);
AP_OFFSET(NetPropertiesV10, maxCollBytes, 96);
static_assert(sizeof(NetPropertiesV9) == 104);
static_assert(sizeof(NetPropertiesV8) == 64);
AP_OFFSET(NetPropertiesV8, regIsGlobal, 28);
AP_OFFSET(NetPropertiesV8, speed, 32);
AP_OFFSET(NetPropertiesV8, port, 36);
AP_OFFSET(NetPropertiesV8, latency, 40);
AP_OFFSET(NetPropertiesV8, maxComms, 44);
AP_OFFSET(NetPropertiesV8, maxRecvs, 48);
AP_OFFSET(NetPropertiesV8, netDeviceType, 52);
AP_OFFSET(NetPropertiesV8, netDeviceVersion, 56);

// ---- net function tables: member count x 8 bytes, and the slots that moved between versions
static_assert(sizeof(NetV11) == 176);
static_assert(sizeof(NetV10) == 160);
static_assert(sizeof(NetV9) == 160);
static_assert(sizeof(NetV8) == 152);
AP_OFFSET(NetV11, devices, 16);
AP_OFFSET(NetV11, accept, 48);
AP_OFFSET(NetV11, isend, 80);
AP_OFFSET(NetV11, test, 104);
AP_OFFSET(NetV11, irecvConsumed, 144);
AP_OFFSET(NetV11, makeVDevice, 152);
AP_OFFSET(NetV11, finalize, 160);
AP_OFFSET(NetV11, setNetAttr, 168);
AP_OFFSET(NetV10, makeVDevice, 152);
AP_OFFSET(NetV9, makeVDevice, 152);
AP_OFFSET(NetV8, irecvConsumed, 144);
AP_OFFSET(NetV8, test, 104);

// ---- enums NCCL grew (2.29+): ncclFunc_t, event bits, states
static_assert(kFuncAllGatherV == 11 && kFuncPutSignal == 12 && kFuncSignal == 13 &&
              kFuncWaitSignal == 14 && kNumFuncs229 == 15);
static_assert(event::kCeColl == 4096 && event::kCeSync == 8192 && event::kCeBatch == 16384 &&
              event::kKernelPhase == 32768 && event::kAllV6 == 32767 && event::kAllV7 == 65535);
static_assert(state::kCeCollStart == 25 && state::kCeCollComplete == 26 &&
              state::kCeSyncStart == 27 && state::kCeSyncComplete == 28 &&
              state::kCeBatchStart == 29 && state::kCeBatchComplete == 30 &&
              state::kKernelPhaseStop == 31);

// ---- tuner v6 / v7 (five-member tables; v7 constants have 5 compute-capability rows)
static_assert(sizeof(TunerV6) == 40 && sizeof(TunerV7) == 40);
AP_OFFSET(TunerV6, init, 8);
AP_OFFSET(TunerV6, getCollInfo, 16);
AP_OFFSET(TunerV6, finalize, 24);
AP_OFFSET(TunerV6, getChunkSize, 32);
AP_OFFSET(TunerV7, getChunkSize, 32);
static_assert(sizeof(TunerConstantsV7) == 1272);
AP_OFFSET(TunerConstantsV7, hwLatencies, 168);
AP_OFFSET(TunerConstantsV7, llMaxBws, 672);
AP_OFFSET(TunerConstantsV7, perChMaxRingLL128Bws, 792);
AP_OFFSET(TunerConstantsV7, perChMaxTreeLL128Bws, 912);
AP_OFFSET(TunerConstantsV7, perChMaxTreeBws, 1032);
AP_OFFSET(TunerConstantsV7, perChMaxNVLSTreeBws, 1152);

// ---- profiler v6: v5 plus the copy-engine members, same size
static_assert(sizeof(ProfilerEventDescrV6) == 112 && alignof(ProfilerEventDescrV6) == 8);
AP_OFFSET(ProfilerEventDescrV6, coll.parentGroup, 104);
AP_OFFSET(ProfilerEventDescrV6, kernelCh.pTimer, 32);
AP_OFFSET(ProfilerEventDescrV6, ceColl.seqNumber, 24);
AP_OFFSET(ProfilerEventDescrV6, ceColl.func, 32);
AP_OFFSET(ProfilerEventDescrV6, ceColl.sendBuff, 40);
AP_OFFSET(ProfilerEventDescrV6, ceColl.recvBuff, 48);
AP_OFFSET(ProfilerEventDescrV6, ceColl.count, 56);
AP_OFFSET(ProfilerEventDescrV6, ceColl.root, 64);
AP_OFFSET(ProfilerEventDescrV6, ceColl.datatype, 72);
AP_OFFSET(ProfilerEventDescrV6, ceColl.syncStrategy, 80);
AP_OFFSET(ProfilerEventDescrV6, ceColl.intraBatchSync, 88);
AP_OFFSET(ProfilerEventDescrV6, ceColl.batchSize, 92);
AP_OFFSET(ProfilerEventDescrV6, ceColl.numBatches, 96);
AP_OFFSET(ProfilerEventDescrV6, ceColl.ceSeqNum, 100);
AP_OFFSET(ProfilerEventDescrV6, ceColl.stream, 104);
AP_OFFSET(ProfilerEventDescrV6, ceCollSync.isComplete, 24);
AP_OFFSET(ProfilerEventDescrV6, ceCollSync.nRanks, 28);
AP_OFFSET(ProfilerEventDescrV6, ceCollBatch.numOps, 24);
AP_OFFSET(ProfilerEventDescrV6, ceCollBatch.totalBytes, 32);
AP_OFFSET(ProfilerEventDescrV6, ceCollBatch.useIntraSync, 40);
static_assert(sizeof(ProfilerV6) == 48 && sizeof(ProfilerEventStateArgsV6) == 8);
AP_OFFSET(ProfilerV6, startEvent, 16);
AP_OFFSET(ProfilerV6, finalize, 40);

// ---- profiler v7: userTag appended to five members, kernelVariant/isSymColl, kernelPhase
static_assert(sizeof(ProfilerEventDescrV7) == 136 && alignof(ProfilerEventDescrV7) == 8);
AP_OFFSET(ProfilerEventDescrV7, rank, 16);
AP_OFFSET(ProfilerEventDescrV7, groupApi.groupDepth, 28);
AP_OFFSET(ProfilerEventDescrV7, collApi.graphCaptured, 64);
AP_OFFSET(ProfilerEventDescrV7, collApi.userTag, 72);
AP_OFFSET(ProfilerEventDescrV7, p2pApi.graphCaptured, 56);
AP_OFFSET(ProfilerEventDescrV7, p2pApi.userTag, 64);
AP_OFFSET(ProfilerEventDescrV7, coll.seqNumber, 24);
AP_OFFSET(ProfilerEventDescrV7, coll.count, 56);
AP_OFFSET(ProfilerEventDescrV7, coll.nChannels, 80);
AP_OFFSET(ProfilerEventDescrV7, coll.nWarps, 81);
AP_OFFSET(ProfilerEventDescrV7, coll.algo, 88);
AP_OFFSET(ProfilerEventDescrV7, coll.proto, 96);
AP_OFFSET(ProfilerEventDescrV7, coll.parentGroup, 104);
AP_OFFSET(ProfilerEventDescrV7, coll.kernelVariant, 112);
AP_OFFSET(ProfilerEventDescrV7, coll.isSymColl, 120);
AP_OFFSET(ProfilerEventDescrV7, coll.userTag, 128);
AP_OFFSET(ProfilerEventDescrV7, p2p.peer, 56);
AP_OFFSET(ProfilerEventDescrV7, p2p.parentGroup, 64);
AP_OFFSET(ProfilerEventDescrV7, p2p.userTag, 72);
AP_OFFSET(ProfilerEventDescrV7, proxyOp.chunkSize, 40);
AP_OFFSET(ProfilerEventDescrV7, kernelCh.pTimer, 32);
AP_OFFSET(ProfilerEventDescrV7, netPlugin.data, 32);
AP_OFFSET(ProfilerEventDescrV7, ceColl.stream, 104);
AP_OFFSET(ProfilerEventDescrV7, ceColl.userTag, 112);
AP_OFFSET(ProfilerEventDescrV7, ceCollBatch.totalBytes, 32);
AP_OFFSET(ProfilerEventDescrV7, kernelPhase.channelId, 24);
AP_OFFSET(ProfilerEventDescrV7, kernelPhase.phaseId, 25);
AP_OFFSET(ProfilerEventDescrV7, kernelPhase.phaseName, 32);
AP_OFFSET(ProfilerEventDescrV7, kernelPhase.pTimer, 40);
static_assert(sizeof(ProfilerV7) == 48 && sizeof(ProfilerEventStateArgsV7) == 8);
AP_OFFSET(ProfilerV7, startEvent, 16);
AP_OFFSET(ProfilerV7, recordEventState, 32);
AP_OFFSET(ProfilerV7, finalize, 40);

// ---- net v12: 8-entry vProps, trailing railId / planeId
static_assert(sizeof(NetVDevicePropsV12) == 36);
static_assert(sizeof(NetPropertiesV12) == 128);
AP_OFFSET(NetPropertiesV12, netDeviceVersion, 60);
AP_OFFSET(NetPropertiesV12, vProps, 64);
AP_OFFSET(NetPropertiesV12, maxP2pBytes, 104);
AP_OFFSET(NetPropertiesV12, maxCollBytes, 112);
AP_OFFSET(NetPropertiesV12, maxMultiRequestSize, 120);
AP_OFFSET(NetPropertiesV12, railId, 124);
AP_OFFSET(NetPropertiesV12, planeId, 126);
static_assert(sizeof(NetV12) == 176);
AP_OFFSET(NetV12, getProperties, 24);
AP_OFFSET(NetV12, makeVDevice, 152);
AP_OFFSET(NetV12, finalize, 160);
AP_OFFSET(NetV12, setNetAttr, 168);

TEST_CASE("ABI layouts match the documented sizes and offsets", "[abi]") {
  // Everything above is checked at compile time; this keeps the file visible in test output.
  CHECK(sizeof(NetPropertiesV11) == 112);
  CHECK(sizeof(NetPropertiesV12) == 128);
  CHECK(sizeof(ProfilerEventDescrV5) == 112);
  CHECK(sizeof(ProfilerEventDescrV7) == 136);
  CHECK(sizeof(TunerConstantsV5) == 1152);
  CHECK(sizeof(TunerConstantsV7) == 1272);
}

TEST_CASE("costCell indexes the flat float[7][3] table", "[abi]") {
  float table[kNumAlgorithms][kNumProtocols];
  for (int a = 0; a < kNumAlgorithms; ++a)
    for (int p = 0; p < kNumProtocols; ++p) table[a][p] = float(a * 10 + p);
  float** asNccl = reinterpret_cast<float**>(table);
  CHECK(*costCell(asNccl, kNumProtocols, kAlgoRing, kProtoSimple) == 12.0f);
  CHECK(*costCell(asNccl, kNumProtocols, kAlgoPat, kProtoLL) == 60.0f);
}
