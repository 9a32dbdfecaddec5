/**
 * An attacker node fuzzes every request/response protocol a real provider node serves (devnet
 * chain, libp2p over TCP on 127.0.0.1): random bytes, random JSON, truncated frames, oversized
 * length prefixes, replayed signed requests, slow (idle and trickling) streams and floods of
 * concurrent streams. Every exchange must end in a typed error answer (or, past libp2p's own
 * stream cap, a reset), within the read deadline; afterwards the node still serves an honest
 * renter, holds no attacker streams and its heap has not grown with the attack.
 *
 * Deterministic: the generator is seeded (SUANLI_FUZZ_SEED overrides the seed).
 */
import assert from "node:assert/strict";
import type { Stream } from "@libp2p/interface";
import { lpStream } from "@libp2p/utils";
import { multiaddr } from "@multiformats/multiaddr";
import { ERROR_NAME_PATTERN } from "../../common/p2p/errors.js";
import type { SuanliHost } from "../../common/p2p/host.js";
import {
  ATTEST_PROTOCOL,
  CANCEL_PROTOCOL,
  LIVENESS_PROTOCOL,
  LOGS_PROTOCOL,
  OFFERS_SYNC_PROTOCOL,
  RESERVE_PROTOCOL,
  STATUS_PROTOCOL,
  TASK_PROTOCOL,
} from "../../common/p2p/protocols.js";
import { counterValue, lightHost, sendReserve, signedReserve } from "../support/attacker.js";
import { startDevnet, type Devnet } from "../support/devnet.js";
import { startTestProvider, type TestProvider } from "../support/provider.js";
import { TestRenter } from "../support/renter.js";
import { waitFor } from "../support/wait.js";

/** The request/response protocols of a provider node: one length-prefixed request, one answer. */
const PROTOCOLS = [RESERVE_PROTOCOL, TASK_PROTOCOL, STATUS_PROTOCOL, LOGS_PROTOCOL, CANCEL_PROTOCOL, ATTEST_PROTOCOL, LIVENESS_PROTOCOL, OFFERS_SYNC_PROTOCOL];
/** Every request is read within this (common/p2p/reqresp.ts DEFAULT_REQUEST_READ_TIMEOUT_MS) plus slack for a loaded machine. */
const READ_DEADLINE_MS = 10_000;
const ANSWER_WAIT_MS = READ_DEADLINE_MS + 8_000;

/** mulberry32: small, seeded, good enough to pick bytes and shapes. */
function generator(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function varint(value: number): Uint8Array {
  const out: number[] = [];
  let rest = value;
  while (rest >= 0x80) {
    out.push((rest & 0x7f) | 0x80);
    rest = Math.floor(rest / 128);
  }
  out.push(rest);
  return Uint8Array.from(out);
}

function frame(payload: Uint8Array): Uint8Array {
  const prefix = varint(payload.byteLength);
  const out = new Uint8Array(prefix.byteLength + payload.byteLength);
  out.set(prefix);
  out.set(payload, prefix.byteLength);
  return out;
}

const text = (value: unknown) => new TextEncoder().encode(typeof value === "string" ? value : JSON.stringify(value));

type Outcome = { kind: "answer"; ok: boolean; name?: string; ms: number } | { kind: "reset"; error: string; ms: number };

/**
 * Opens a stream, writes `bytes` (already framed as the attack wants) or runs `bytes(stream)`,
 * optionally closes the writing side, and returns how the provider answered.
 */
async function exchange(
  host: SuanliHost,
  addr: string,
  protocol: string,
  bytes: Uint8Array | ((stream: Stream) => Promise<void>),
  options: { closeWrite?: boolean } = {},
): Promise<Outcome> {
  const started = Date.now();
  let stream: Stream;
  try {
    stream = await host.dialProtocol(multiaddr(addr), protocol, { signal: AbortSignal.timeout(10_000) });
  } catch (error) {
    return { kind: "reset", error: (error as Error).name, ms: Date.now() - started };
  }
  const lp = lpStream(stream, { maxDataLength: 1024 * 1024 });
  // Read while writing: the answer may come before the attacker is done (a trickle).
  const answer = lp.read({ signal: AbortSignal.timeout(ANSWER_WAIT_MS) }).then(
    (raw): Outcome => {
      const envelope = JSON.parse(new TextDecoder().decode(raw.subarray())) as { ok: boolean; error?: { name: string } };
      return { kind: "answer", ok: envelope.ok, name: envelope.error?.name, ms: Date.now() - started };
    },
    (error: unknown): Outcome => ({ kind: "reset", error: (error as Error).name, ms: Date.now() - started }),
  );
  try {
    if (typeof bytes === "function") await bytes(stream);
    else if (bytes.byteLength > 0) stream.send(bytes);
    if (options.closeWrite ?? true) await stream.close({ signal: AbortSignal.timeout(ANSWER_WAIT_MS) }).catch(() => undefined);
  } catch {
    // the provider may reset first (flood): the answer says what happened
  }
  try {
    return await answer;
  } finally {
    stream.abort(new Error("done"));
  }
}

describe("provider agent: an attacker node fuzzes every request/response protocol", function () {
  this.timeout(120_000);
  let devnet: Devnet;
  let provider: TestProvider;
  let renter: TestRenter;
  let attacker: SuanliHost;
  /** A second attacker peer holds the slow streams (a peer's own stream cap would otherwise refuse its other attacks). */
  let sloth: SuanliHost;
  const seed = Number(process.env.SUANLI_FUZZ_SEED ?? 0x5ead);
  const random = generator(seed);

  before(async () => {
    devnet = await startDevnet({ wallClockBlocks: true });
    provider = await startTestProvider(devnet, 1);
    renter = await TestRenter.start(devnet, 2);
    attacker = await lightHost();
    sloth = await lightHost();
  });
  after(async () => {
    await attacker?.stop();
    await sloth?.stop();
    await renter?.close();
    await provider?.close();
    await devnet?.close();
  });

  it("answers random, truncated, oversized, replayed, slow and flooding requests with typed errors, and keeps serving", async () => {
    const addr = provider.peer.addr;
    const served = provider.daemon.p2p.host.getProtocols();
    for (const protocol of PROTOCOLS) assert.ok(served.includes(protocol), `the provider serves ${protocol}`);
    // One connection each first: concurrent first dials could race into two, and closing the
    // spare one resets its streams.
    await attacker.dial(multiaddr(addr));
    await sloth.dial(multiaddr(addr));
    const heapBefore = process.memoryUsage().heapUsed;
    const outcomes: { protocol: string; attack: string; outcome: Outcome }[] = [];
    const record = (protocol: string, attack: string) => (outcome: Outcome) => outcomes.push({ protocol, attack, outcome });

    // Slow attacks first: an idle stream per protocol, and a trickle (a length prefix, then a
    // byte every second) per protocol, all at once from one peer.
    const slow: Promise<unknown>[] = [];
    const trickle = async (stream: Stream) => {
      stream.send(varint(200));
      for (let i = 0; i < 14; i++) {
        await new Promise((resolve) => setTimeout(resolve, 1_000));
        if (stream.status !== "open" || stream.writeStatus !== "writable") return;
        stream.send(Uint8Array.from([0x20]));
      }
    };
    // Opened one after another (each stream negotiated before the next is asked for).
    for (const protocol of PROTOCOLS) {
      slow.push(exchange(sloth, addr, protocol, new Uint8Array(0), { closeWrite: false }).then(record(protocol, "idle")));
      await new Promise((resolve) => setTimeout(resolve, 100));
      slow.push(exchange(sloth, addr, protocol, trickle, { closeWrite: false }).then(record(protocol, "trickle")));
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    await Promise.all(slow);

    for (const protocol of PROTOCOLS) {
      const attacks: [string, Uint8Array][] = [];
      for (let i = 0; i < 12; i++) {
        const length = 1 + Math.floor(random() * 2_000);
        attacks.push(["random bytes", frame(Uint8Array.from({ length }, () => Math.floor(random() * 256)))]);
      }
      for (let i = 0; i < 12; i++) {
        const shapes: unknown[] = [
          null,
          42,
          "x".repeat(Math.floor(random() * 500)),
          [1, 2, 3],
          { chainId: Math.floor(random() * 1e9) },
          { auth: { request: { leaseId: "1" }, signature: "0x00" } },
          { request: {}, signature: 7, chainId: -1 },
          { v: 1, type: "challenge", id: "z" },
          { ["__proto__"]: { polluted: true }, constructor: { prototype: { polluted: true } } },
          { deep: JSON.parse("[".repeat(500) + "]".repeat(500)) as unknown },
        ];
        attacks.push(["random json", frame(text(shapes[Math.floor(random() * shapes.length)]))]);
      }
      for (let i = 0; i < 6; i++) {
        const full = frame(text({ chainId: 31337, request: { renter: "0x" + "1".repeat(40) }, signature: "0x" + "2".repeat(130) }));
        attacks.push(["truncated", full.subarray(0, 1 + Math.floor(random() * (full.byteLength - 2)))]);
      }
      attacks.push(["oversized", Uint8Array.from([...varint(32 * 1024 * 1024), ...new Uint8Array(1024)])]);
      attacks.push(["oversized", Uint8Array.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01])]);
      attacks.push(["empty", new Uint8Array(0)]);
      // Two at a time: within the smallest per-peer stream cap (attest's).
      for (let i = 0; i < attacks.length; i += 2) {
        await Promise.all(attacks.slice(i, i + 2).map(([attack, bytes]) => exchange(attacker, addr, protocol, bytes).then(record(protocol, attack))));
      }
      // A flood: 40 concurrent streams of junk from one peer.
      await Promise.all(Array.from({ length: 40 }, () => exchange(attacker, addr, protocol, frame(text({ flood: random() }))).then(record(protocol, "flood"))));
    }

    // Replayed: one signed reserve request, sent again and again.
    const body = await signedReserve(renter, provider.peer, { machineId: provider.agent.machines[0]!.machineId, units: 1, duration: 60 });
    const replies = [];
    for (let i = 0; i < 6; i++) replies.push(await sendReserve(attacker, provider.peer, body));
    assert.equal(replies.filter((reply) => reply.accepted).length, 1);

    // Every exchange ended in a typed error answer (a stream over a cap is answered
    // TooManyStreamsError, or reset past libp2p's own cap in a flood), and every attack on every
    // protocol got its own answer at least once.
    const expected: Record<string, string[]> = {
      "random bytes": ["InvalidMessageError", "MessageTooLargeError"],
      "random json": ["InvalidMessageError", "WrongChainError"],
      truncated: ["InvalidMessageError"],
      oversized: ["MessageTooLargeError", "InvalidMessageError"],
      empty: ["InvalidMessageError"],
      idle: ["RequestTimeoutError"],
      trickle: ["RequestTimeoutError"],
      flood: ["InvalidMessageError", "TooManyStreamsError"],
    };
    const byAttack = new Map<string, Map<string, number>>();
    const answered = new Set<string>();
    for (const { protocol, attack, outcome } of outcomes) {
      const key = outcome.kind === "reset" ? `reset(${outcome.error})` : outcome.ok ? "ok" : outcome.name!;
      const counts = byAttack.get(attack) ?? new Map<string, number>();
      counts.set(key, (counts.get(key) ?? 0) + 1);
      byAttack.set(attack, counts);
      const where = `${attack} on ${protocol}: ${key} after ${outcome.ms} ms`;
      if (outcome.kind === "reset") {
        assert.equal(attack, "flood", where);
        continue;
      }
      assert.ok(!outcome.ok && ERROR_NAME_PATTERN.test(outcome.name!), where);
      assert.ok([...expected[attack]!, "TooManyStreamsError"].includes(outcome.name!), where);
      if (expected[attack]!.includes(outcome.name!)) answered.add(`${protocol} ${attack}`);
      if (attack === "idle" || attack === "trickle") assert.ok(outcome.ms < ANSWER_WAIT_MS, where);
    }
    for (const protocol of PROTOCOLS) for (const attack of Object.keys(expected)) assert.ok(answered.has(`${protocol} ${attack}`), `${attack} on ${protocol} was answered as such`);
    assert.ok(outcomes.length >= PROTOCOLS.length * 70, `${outcomes.length} exchanges`);

    // Refusals are counted for every protocol, attest and liveness included.
    for (const protocol of PROTOCOLS) {
      assert.ok((await counterValue(provider.daemon.metrics.registry, "suanli_p2p_request_errors_total", { protocol })) > 0, `errors counted for ${protocol}`);
    }

    // The node is healthy: an honest renter rents, sends a task and reads its status.
    const machineId = provider.agent.machines[0]!.machineId;
    const leaseId = await renter.rent(provider.peer, { machineId, units: 1, duration: 60 });
    assert.equal((await renter.status(provider.peer, leaseId)).state, "waiting_spec");
    // No attacker stream is left open on the provider once the attacker is done.
    await attacker.hangUp(provider.daemon.p2p.host.peerId);
    await waitFor("the attacker's connections to close", () => provider.daemon.p2p.host.getConnections(attacker.peerId).length === 0);
    const open = provider.daemon.p2p.host.getConnections().reduce((sum, connection) => sum + connection.streams.length, 0);
    assert.ok(open < 16, `${open} streams open on the provider`);
    // Memory: the attack left nothing behind worth measuring (the heap holds this process's
    // devnet, provider and renter too, so the bound is generous).
    const growthMiB = (process.memoryUsage().heapUsed - heapBefore) / 2 ** 20;
    assert.ok(growthMiB < 128, `heap grew ${growthMiB.toFixed(1)} MiB (seed ${seed}; outcomes ${JSON.stringify([...byAttack].map(([a, c]) => [a, Object.fromEntries(c)]))})`);
  });
});
