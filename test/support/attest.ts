/**
 * Attestor-role fixtures: attestor and provider daemons on the devnet, the provider's attest and
 * liveness responders mounted as the provider agent mounts them, and a dishonest runner.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { bytesToHex, hexToBytes, type Hex } from "viem";
import { computeAnswerRow, deriveMatrixKeys, generateMatrixB, rowToBytes } from "../../common/attest/arithmetic.js";
import type { SignedAttestation } from "../../common/attest/attestation.js";
import { MerkleTree, leafHash } from "../../common/attest/merkle.js";
import { startAttestorService, type AttestorService } from "../../node/attest/service.js";
import { mountProviderAttestation, type ProviderAttestation } from "../../node/attest/provider-service.js";
import type { ProviderMachine, ChallengeRecord } from "../../node/attest/challenge/index.js";
import type { MemoryRunner, Runner, RunnerChallenge, RunnerCommitment } from "../../node/attest/runner/index.js";
import type { MachineOfferInput } from "../../node/offers/publisher.js";
import { leaseMarketAbi } from "../../common/abi.js";
import { devnetAccount, devnetPrivateKey } from "../../common/devnet.js";
import { ANY_RENTER, suanliDomain, type Offer } from "../../common/eip712.js";
import { modelHash } from "../../common/gpu.js";
import { signOffer } from "../../common/chain/sign.js";
import type { ChainClients } from "../../node/chain/clients.js";
import { createLogger, silentLogger, type Logger } from "../../node/log/logger.js";
import { startTestDaemon } from "./daemons.js";
import { registerProvider, send, type Devnet } from "./devnet.js";
import { merge } from "./merge.js";

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

export const ZERO32 = `0x${"0".repeat(64)}` as Hex;

/** Lease terms the attestor tests use: 100 base units per second for an hour, 50 % collateral. */
export const PRICE = 100n;
export const DURATION = 3_600;
export const COLLATERAL_BPS = 5_000;
/** The machine test providers declare (one A100). */
export const TEST_MACHINE = { model: "A100-80GB", units: 1, vramMiB: 81_920 };

export type TestDaemon = Awaited<ReturnType<typeof startTestDaemon>>;

/** The first listen address of a daemon, with its /p2p/ suffix. */
export function addrOf(daemon: TestDaemon): string {
  return daemon.p2p.host.getMultiaddrs()[0]!.toString();
}

/** The offer a test provider publishes for one of its machines (registerProvider declares nvlink, eu-west). */
export function machineOffer(machine: ProviderMachine, attestations: SignedAttestation[] = []): MachineOfferInput {
  return {
    machine: { machineId: machine.machineId, model: machine.model, units: machine.units, vramMiB: machine.vramMiB, interconnect: "nvlink", region: "eu-west", cluster: ZERO32 },
    terms: { pricePerUnitSecond: 500n, minDuration: 60, maxDuration: 86_400, collateralBps: 5_000, startWindow: 600 },
    capacity: { freeUnits: machine.units },
    attestations,
  };
}

/** Tries a verdict is asked for while the provider cannot be reached (each an error that says nothing of the machine). */
const VERDICT_TRIES = 3;

/**
 * A machine's verdict from a requested challenge. The attestor challenges a new offer on its own
 * first (the scan a new offer kicks); when that one failed, the request meets the provider's
 * backoff, and the verdict is the recorded failure. An `unreachable` error is no verdict (the
 * attestor itself tries again at its next scan): on a loaded host a dial to one of many test
 * providers started at once can fail (seen: `PeerUnreachableError` for one of nine in
 * attest-cc.test.ts), so it is asked again, at most VERDICT_TRIES times, and that error is
 * returned only when every try met it.
 */
export async function challengeVerdict(attestor: AttestorService, machineId: number): Promise<ChallengeRecord> {
  let record = await attestor.challenger.challenge(machineId, "request");
  for (let tries = 1; tries < VERDICT_TRIES && record.outcome === "error" && record.reason === "unreachable"; tries++) {
    record = await attestor.challenger.challenge(machineId, "request");
  }
  if (record.outcome !== "error" || record.reason !== "backoff") return record;
  const failed = (await attestor.results.history(machineId, 10)).find((r) => r.outcome === "fail");
  if (!failed) throw new Error(`machine ${machineId} is in backoff without a recorded failure: ${record.detail}`);
  return failed;
}

/** Logs of a test node on stderr when SUANLI_TEST_LOG names a level (debugging), else none. */
export function testLogger(node: string): Logger {
  const level = process.env.SUANLI_TEST_LOG as "debug" | "info" | "warn" | undefined;
  return level ? createLogger({ level, format: "pretty" }).child({ node }) : silentLogger();
}

/** An attestor daemon (devnet account `index`, which must hold ATTESTOR_ROLE) running the attestor role. */
export async function startAttestorDaemon(devnet: Devnet, index: number, overrides: Record<string, unknown> = {}): Promise<{ daemon: TestDaemon; attestor: AttestorService }> {
  const daemon = await startTestDaemon(
    devnet,
    merge({ chain: { privateKey: devnetPrivateKey(index) }, attest: { challenge: { preset: "cpu-devnet" }, runner: { workers: 1 } } }, overrides),
    {
      logger: testLogger(`attestor-${index}`),
    },
  );
  try {
    const attestor = await startAttestorService(daemon);
    daemon.attach(attestor);
    return { daemon, attestor };
  } catch (error) {
    await daemon.close();
    throw error;
  }
}

/** A provider daemon (devnet account `index`) that publishes offers and answers attestors. */
export async function startProviderDaemon(
  devnet: Devnet,
  index: number,
  options: {
    runner: Runner;
    machines: () => ProviderMachine[];
    onAttestation?: (machineId: number, signed: SignedAttestation) => void | Promise<void>;
    overrides?: Record<string, unknown>;
    memoryRunner?: MemoryRunner;
    /** Milliseconds between the provider's scans for false liveness faults (default 10 s). */
    falseFaultScanMs?: number;
  },
): Promise<{ daemon: TestDaemon; mounted: ProviderAttestation }> {
  const daemon = await startTestDaemon(devnet, merge({ chain: { privateKey: devnetPrivateKey(index) }, offers: { reannounceIntervalMs: 1_000 } }, options.overrides ?? {}), {
    publishesOffers: true,
    logger: testLogger(`provider-${index}`),
  });
  const mounted = await mountProviderAttestation(daemon, {
    runner: options.runner,
    machines: (machineId) => options.machines().find((machine) => machine.machineId === machineId),
    onAttestation: options.onAttestation,
    memoryRunner: options.memoryRunner,
    ...(options.falseFaultScanMs ? { falseFaultScanMs: options.falseFaultScanMs } : {}),
  });
  daemon.attach(mounted);
  return { daemon, mounted };
}

/**
 * A provider daemon (devnet account `index`, closed with `nodes`) with one registered machine and
 * its offer published. `received` lists the machine ids it was handed attestations for.
 */
export async function startProviderWithMachine(
  devnet: Devnet,
  index: number,
  options: { runner: Runner; machine: Omit<ProviderMachine, "machineId">; memoryRunner?: MemoryRunner },
  nodes: TestDaemon[],
): Promise<{ provider: { daemon: TestDaemon; mounted: ProviderAttestation }; machineId: number; received: number[] }> {
  const machines: ProviderMachine[] = [];
  const received: number[] = [];
  const provider = await startProviderDaemon(devnet, index, {
    runner: options.runner,
    machines: () => machines,
    onAttestation: (machineId) => void received.push(machineId),
    ...(options.memoryRunner ? { memoryRunner: options.memoryRunner } : {}),
  });
  nodes.push(provider.daemon);
  const [machineId] = await registerProvider(devnet, await devnet.wallet(index), {
    peerId: provider.daemon.p2p.host.peerId.toString(),
    stake: 100_000_000n,
    machines: [options.machine],
  });
  machines.push({ machineId: machineId!, ...options.machine });
  await provider.daemon.offers.publisher!.set(machineOffer(machines[0]!));
  return { provider, machineId: machineId!, received };
}

/**
 * A provider daemon (devnet account `index`, closed with `nodes`) with `count` registered machines
 * like `machine` (default TEST_MACHINE), all answered by `runner`, their offers published.
 */
export async function startProviderWithMachines(
  devnet: Devnet,
  index: number,
  options: { runner: Runner; count: number; machine?: Omit<ProviderMachine, "machineId"> },
  nodes: TestDaemon[],
): Promise<{ daemon: TestDaemon; ids: number[] }> {
  const machine = options.machine ?? TEST_MACHINE;
  const machines: ProviderMachine[] = [];
  const { daemon } = await startProviderDaemon(devnet, index, { runner: options.runner, machines: () => machines });
  nodes.push(daemon);
  const ids = await registerProvider(devnet, await devnet.wallet(index), {
    peerId: daemon.p2p.host.peerId.toString(),
    stake: 100_000_000n,
    machines: Array.from({ length: options.count }, () => machine),
  });
  for (const machineId of ids) {
    machines.push({ machineId, ...machine });
    await daemon.offers.publisher!.set(machineOffer(machines.at(-1)!));
  }
  return { daemon, ids };
}

/**
 * A dishonest runner: commits to a consistent Merkle tree over rows that are each wrong in one
 * element (what a provider guessing, or computing with a broken kernel, sends). With
 * `correctFraction` f it is the partial-work cheat instead: the first f of the rows are the real
 * product (the work a slower machine finished in time), the rest are filler.
 */
export class WrongRowsRunner implements Runner {
  readonly name = "wrong-rows";
  /** `wrongUnits`: only these units' rows are wrong (default: every unit's). */
  constructor(
    private readonly correctFraction = 0,
    private readonly wrongUnits?: readonly number[],
  ) {}
  async computeCommit(challenge: RunnerChallenge): Promise<RunnerCommitment> {
    const units = challenge.units.map((unit, u) => {
      const keys = deriveMatrixKeys(hexToBytes(unit.seed));
      const b = generateMatrixB(keys, challenge.cols);
      const cheat = !this.wrongUnits || this.wrongUnits.includes(u);
      const correct = cheat ? Math.floor(challenge.rowsPerUnit * this.correctFraction) : challenge.rowsPerUnit;
      const rows = Array.from({ length: challenge.rowsPerUnit }, (_, r) => {
        const row = computeAnswerRow(keys.a, b, r, challenge.cols, challenge.rounds);
        if (r >= correct) row[r % challenge.cols]! += 1;
        return rowToBytes(row);
      });
      const leafKey = hexToBytes(unit.leafKey);
      return { rows, tree: MerkleTree.fromLeaves(rows.map((row, i) => leafHash(leafKey, i, row))) };
    });
    return {
      roots: units.map((unit) => bytesToHex(unit.tree.root)),
      rowsPerUnit: challenge.rowsPerUnit,
      computeMs: 0,
      openRows: async (picks) =>
        picks.map(({ unit, index }) => ({ unit, index, data: bytesToHex(units[unit]!.rows[index]!), proof: units[unit]!.tree.proof(index).map((s) => bytesToHex(s)) })),
      release: async () => undefined,
    };
  }
  async close(): Promise<void> {}
}

/** The renter opens a lease on the provider's signed offer; the provider activates it. Returns the lease id. */
export async function openActiveLease(devnet: Devnet, renter: Required<ChainClients>, providerIndex: number, machineId: number): Promise<bigint> {
  const provider = await devnet.wallet(providerIndex);
  const market = devnet.deployment.contracts.market!;
  const offer: Offer = {
    provider: provider.account.address,
    machineId,
    model: modelHash(TEST_MACHINE.model),
    pricePerUnitSecond: PRICE,
    minBidPerUnitSecond: 0n,
    minDuration: 60,
    maxDuration: 86_400,
    collateralBps: COLLATERAL_BPS,
    startWindow: 600,
    nonce: 0n,
    expiry: Math.floor(Date.now() / 1000) + 7_200,
    renter: ANY_RENTER,
  };
  const signature = await signOffer(devnetAccount(providerIndex), suanliDomain(devnet.deployment.chainId, market), offer);
  const terms = { units: 1, duration: DURATION, maxPricePerUnitSecond: PRICE, interruptible: false, bidPerUnitSecond: 0n, preempt: [] as bigint[] };
  const { result: leaseId } = await renter.publicClient.simulateContract({
    account: renter.account,
    address: market,
    abi: leaseMarketAbi,
    functionName: "openLease",
    args: [offer, signature, terms],
  });
  await send(renter, { address: market, abi: leaseMarketAbi, functionName: "openLease", args: [offer, signature, terms] });
  await send(provider, { address: market, abi: leaseMarketAbi, functionName: "activate", args: [leaseId] });
  return leaseId;
}

/** A provider node in its own process (test/node/fixtures/provider-process.mjs). */
export type SpawnedProvider = { child: ChildProcess; peerId: string; addrs: string[]; dataDir: string };

/** A provider node in a child process, so it can be killed like a crashed machine. */
export async function spawnProvider(devnet: Devnet, index: number): Promise<SpawnedProvider> {
  const dataDir = await mkdtemp(path.join(tmpdir(), "suanli-provider-"));
  const input = JSON.stringify({ dataDir, rpcUrl: devnet.rpcUrl, deploymentsDir: devnet.deploymentsDir, privateKey: devnetPrivateKey(index) });
  const child = spawn(process.execPath, ["--import", "tsx", path.join(repoRoot, "test/node/fixtures/provider-process.mjs"), input], {
    cwd: repoRoot,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const ready = await new Promise<{ peerId: string; addrs: string[] }>((resolve, reject) => {
    let stdout = "";
    const timer = setTimeout(() => reject(new Error(`the provider process did not start: ${stderr}`)), 60_000);
    child.stdout!.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
      const line = stdout.split("\n").find((l) => l.startsWith("READY "));
      if (line) {
        clearTimeout(timer);
        resolve(JSON.parse(line.slice(6)) as { peerId: string; addrs: string[] });
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`the provider process exited with ${code}: ${stderr}`));
    });
  });
  return { child, dataDir, ...ready };
}

/**
 * A GPU as the attestor sees it: a device with a fixed int8 rate (ops/s) that serializes the
 * work given to it. Tests cannot run GPUs, so the rows are computed by the CPU runner (correct,
 * as a real device's would be) and the answer is held back until the device would have finished.
 */
export class SimulatedDevice {
  private busyUntil = 0;
  /**
   * The share of the device a renter's task keeps busy (0..1): a challenge gets the rest, so it
   * runs at opsPerSecond × (1 − load), as a kernel sharing the GPU's SMs with another does.
   */
  load = 0;
  constructor(readonly opsPerSecond: number) {}
  /** Reserves the device for `ops` operations from now (after the work already queued); resolves when done. */
  async run(ops: number): Promise<void> {
    const start = Math.max(performance.now(), this.busyUntil);
    this.busyUntil = start + (ops / (this.opsPerSecond * (1 - Math.min(0.999, Math.max(0, this.load))))) * 1000;
    const wait = this.busyUntil - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  }
}

/**
 * A runner that spreads a challenge over `devices` (parallel runners, outsourced GPUs, fewer
 * units than claimed) the fastest way: rows are independent, so every unit's rows are split
 * evenly over all devices, and it answers when the slowest has finished its share.
 */
export class SimulatedGpuRunner implements Runner {
  readonly name = "simulated-gpu";
  constructor(
    private readonly cpu: Runner,
    private readonly devices: SimulatedDevice[],
  ) {}
  async computeCommit(challenge: RunnerChallenge, options?: { signal?: AbortSignal }): Promise<RunnerCommitment> {
    const ops = 2 * challenge.rowsPerUnit * challenge.units.length * challenge.cols * challenge.cols * challenge.rounds;
    const work = this.devices.map((device) => device.run(ops / this.devices.length));
    const [commitment] = await Promise.all([this.cpu.computeCommit(challenge, options), ...work]);
    // A distinct made-up UUID per unit: what a provider with fewer devices than units would name.
    return { ...commitment, devices: challenge.units.map((_, u) => `GPU-simulated-${u}`) };
  }
  async close(): Promise<void> {}
}
