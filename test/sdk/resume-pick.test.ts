/**
 * Which checkpoint a resumed lease starts from (sdk/internal/resume.ts, docs/data.md "Resume"),
 * with real EIP-712 signatures on this deployment's domain; the providers' status answers are
 * stood in for (the real path: test/e2e/resume-checkpoint.test.ts). Copies to the renter's node
 * (sdk/internal/checkpoint-copies.ts) with its data routes stood in for (the real path:
 * test/e2e/resume-copy.test.ts). And the spec's resumeHints at the boundary.
 */
import assert from "node:assert/strict";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { checkpointToWire, signCheckpoint } from "../../common/attest/checkpoint.js";
import { suanliDomain } from "../../common/eip712.js";
import { taskSpecSchema, type TaskSpec } from "../../common/protocols/task-spec.js";
import type { SuanliContext } from "../../sdk/internal/context.js";
import { CheckpointCopies, type NodeDataActions } from "../../sdk/internal/checkpoint-copies.js";
import { CHECKPOINT_UNAVAILABLE, groupRankSpecs, pickCheckpoint, pickGroupCheckpoints, refreshCheckpoint, resumedSpec } from "../../sdk/internal/resume.js";
import { TaskStore } from "../../sdk/internal/store.js";
import type { TaskAttempt } from "../../sdk/types.js";

const domain = suanliDomain(31337, "0x00000000000000000000000000000000000000aa");
const renter = privateKeyToAccount(generatePrivateKey());
const CIDS = [
  "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy",
  "bafkreidgvpkjawlxz6sffxzwgooowe5yt7i6wsyg236mfoks77nywkptdq",
  "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku",
];
const PEER = "12D3KooWEyoppNCUx8Yx66oV9fJnriXwCcXwDDUA2kj6vnc6iDEp";

function attempt(leaseId: bigint, key = generatePrivateKey()): TaskAttempt & { key: `0x${string}` } {
  const account = privateKeyToAccount(key);
  return { leaseId, provider: account.address, peerId: PEER, addrs: [`/ip4/127.0.0.1/tcp/${4000 + Number(leaseId)}`], key } as unknown as TaskAttempt & { key: `0x${string}` };
}

const sign = (a: { key: `0x${string}`; leaseId: bigint }, seq: bigint, cid: string) =>
  signCheckpoint(privateKeyToAccount(a.key), domain, { leaseId: a.leaseId, seq, cid, bytes: 3n, time: 1_000n * seq });

function context(answer: (leaseId: bigint) => unknown): SuanliContext {
  return {
    domain,
    account: renter,
    walletClient: { signTypedData: (parameters: Parameters<typeof renter.signTypedData>[0]) => renter.signTypedData(parameters) },
    link: { status: async (_peer: unknown, body: { auth: { leaseId: bigint } }) => answer(body.auth.leaseId) },
    progress: () => {},
  } as unknown as SuanliContext;
}

describe("sdk: which checkpoint a resumed lease starts from", () => {
  it("the newest lease's newest verified record; a lease with none but a resumedFrom gives that; a stored record that no longer verifies is skipped", async () => {
    const first = attempt(1n);
    const second = attempt(2n);
    const ctx = context(() => ({ state: "running" }));
    first.checkpoint = await sign(first, 4n, CIDS[0]!);
    assert.equal((await pickCheckpoint(ctx, { attempts: [first, second] }))?.cid, CIDS[0], "the second lease made none and resumed from nothing: the first's");
    second.resumedFrom = CIDS[0];
    assert.deepEqual(await pickCheckpoint(ctx, { attempts: [first, second] }).then((p) => [p?.cid, p?.source, p?.leaseId]), [CIDS[0], "resumedFrom", 2n]);
    second.checkpoint = await sign(second, 2n, CIDS[1]!);
    const point = await pickCheckpoint(ctx, { attempts: [first, second] });
    assert.deepEqual([point?.cid, point?.source, point?.seq, point?.leaseId], [CIDS[1], "checkpoint", 2n, 2n]);
    assert.deepEqual(point?.hints, [`/ip4/127.0.0.1/tcp/4002/p2p/${PEER}`, `/ip4/127.0.0.1/tcp/4001/p2p/${PEER}`], "the providers' addresses, newest lease first");
    // A task file edited by hand: the second lease's record now names another CID under the old signature.
    second.checkpoint = { ...second.checkpoint, record: { ...second.checkpoint.record, cid: CIDS[2]! } };
    assert.equal((await pickCheckpoint(ctx, { attempts: [first, second] }))?.cid, CIDS[0], "skipped: back to what the second lease resumed from");
  });

  it("never picks a CID a lease could not fetch; none left is null; a group task gets no single checkpoint", async () => {
    const first = attempt(1n);
    const second = attempt(2n);
    const ctx = context(() => ({ state: "running" }));
    first.checkpoint = await sign(first, 1n, CIDS[0]!);
    second.resumedFrom = CIDS[0];
    second.migratedBecause = CHECKPOINT_UNAVAILABLE;
    assert.equal(await pickCheckpoint(ctx, { attempts: [first, second] }), null);
    const grouped = attempt(3n);
    grouped.checkpoint = await sign(grouped, 1n, CIDS[1]!);
    grouped.group = [grouped, attempt(4n)];
    assert.equal(await pickCheckpoint(ctx, { attempts: [grouped] }), null);
  });

  it("a group: one checkpoint per rank, all from one attempt; an attempt with a rank missing falls back to an older complete set; a CID a rank could not fetch is not picked again", async () => {
    const ctx = context(() => ({ state: "running" }));
    const group = (...members: (TaskAttempt & { key: `0x${string}` })[]) => Object.assign(members[0]!, { group: members });
    const [a0, a1] = [attempt(10n), attempt(11n)];
    const first = group(a0, a1);
    a0.checkpoint = await sign(a0, 2n, CIDS[0]!);
    assert.equal(await pickGroupCheckpoints(ctx, { attempts: [first] }), null, "rank 1 has none: no set, not rank 0's alone");
    a1.checkpoint = await sign(a1, 1n, CIDS[1]!);
    const set = await pickGroupCheckpoints(ctx, { attempts: [first] });
    assert.deepEqual(
      set?.ranks.map((rank) => [rank.cid, rank.leaseId, rank.source]),
      [
        [CIDS[0], 10n, "checkpoint"],
        [CIDS[1], 11n, "checkpoint"],
      ],
    );
    assert.deepEqual(set?.leaseIds, [10n, 11n]);
    assert.deepEqual(set?.ranks[0]!.hints, [`/ip4/127.0.0.1/tcp/4010/p2p/${PEER}`, `/ip4/127.0.0.1/tcp/4011/p2p/${PEER}`], "every member's provider");
    // The next attempt resumed from that set; its rank 0 made a newer checkpoint, its rank 1 none yet: the older complete set, not a mix.
    const [b0, b1] = [attempt(12n), attempt(13n)];
    const second = group(b0, b1);
    b0.resumedFrom = CIDS[0];
    b1.resumedFrom = CIDS[1];
    b0.checkpoint = await sign(b0, 1n, CIDS[2]!);
    b1.resumedFrom = undefined;
    assert.deepEqual((await pickGroupCheckpoints(ctx, { attempts: [first, second] }))?.leaseIds, [10n, 11n], "rank 1 of the newer attempt has nothing: the older set");
    b1.resumedFrom = CIDS[1];
    assert.deepEqual(
      (await pickGroupCheckpoints(ctx, { attempts: [first, second] }))?.ranks.map((rank) => [rank.cid, rank.source]),
      [
        [CIDS[2], "checkpoint"],
        [CIDS[1], "resumedFrom"],
      ],
      "the newer attempt: rank 0's newer record, rank 1 what it started from",
    );
    // Rank 1 of the newer attempt could not fetch CIDS[1] from anyone: neither set has it any more, and rank 0's alone is not enough.
    b1.migratedBecause = CHECKPOINT_UNAVAILABLE;
    assert.equal(await pickGroupCheckpoints(ctx, { attempts: [first, second] }), null);
    // A record edited by hand does not verify: that rank has none.
    b1.migratedBecause = undefined;
    a1.checkpoint = { ...a1.checkpoint, record: { ...a1.checkpoint.record, cid: CIDS[2]! } };
    assert.equal(await pickGroupCheckpoints(ctx, { attempts: [first] }), null);
  });

  it("each new rank's spec starts from the same rank's checkpoint; a group of another size starts every rank from the beginning", () => {
    const spec = taskSpecSchema.parse({ image: "busybox", command: "true", checkpoint: { periodSeconds: 10 } });
    const rank = (cid: string, leaseId: bigint) => ({
      cid,
      leaseId,
      provider: renter.address,
      source: "checkpoint" as const,
      seq: 1n,
      time: 1n,
      hints: [`/ip4/127.0.0.1/tcp/2/p2p/${PEER}`],
    });
    const specs = groupRankSpecs(spec, { leaseIds: [1n, 2n], ranks: [rank(CIDS[0]!, 1n), rank(CIDS[1]!, 2n)] });
    assert.deepEqual([specs(0, 2).resumeFrom, specs(1, 2).resumeFrom], [CIDS[0], CIDS[1]]);
    assert.deepEqual(specs(1, 2).resumeHints, [`/ip4/127.0.0.1/tcp/2/p2p/${PEER}`]);
    for (const [r, size] of [
      [0, 3],
      [2, 3],
      [0, 1],
    ] as const)
      assert.equal(specs(r, size).resumeFrom, undefined, `rank ${r} of ${size}: from the beginning`);
    assert.equal(groupRankSpecs(spec, null)(0, 2).resumeFrom, undefined);
  });

  it("refreshCheckpoint keeps the newest record that verifies and ignores a forged newer one", async () => {
    const lease = attempt(5n);
    const older = checkpointToWire(await sign(lease, 1n, CIDS[0]!));
    const newer = checkpointToWire(await sign(lease, 2n, CIDS[1]!));
    const forged = checkpointToWire(await sign({ key: generatePrivateKey(), leaseId: 5n }, 3n, CIDS[2]!));
    let answer: unknown[] = [older, newer];
    const ctx = context(() => ({ state: "running", checkpoints: answer }));
    assert.equal(await refreshCheckpoint(ctx, lease), "running");
    assert.equal(lease.checkpoint?.record.cid, CIDS[1]);
    answer = [older, newer, forged];
    await refreshCheckpoint(ctx, lease);
    assert.equal(lease.checkpoint?.record.cid, CIDS[1], "the forged record is ignored, the previous one stays");
    const gone = context(() => Promise.reject(new Error("unreachable")));
    assert.equal(await refreshCheckpoint(gone, lease), undefined);
    assert.equal(lease.checkpoint?.record.cid, CIDS[1]);
  });

  it("copies each newer verified record to the renter's node (the provider's addresses as hints), newest only, and a failed copy keeps the previous one", async () => {
    const lease = attempt(6n);
    const store = new TaskStore();
    await store.put({ taskId: "t", createdAt: 1, request: {}, spec: { env: {} } as unknown as TaskSpec, autoMigrate: true, attempts: [lease] });
    const calls: string[] = [];
    let refuse = false;
    const actions = {
      listData: async () => ({ items: [], node: { peerId: PEER, addrs: [`/ip4/127.0.0.1/tcp/9000/p2p/${PEER}`] } }),
      pinData: async (cid: string, parameters: { nodeUrl: string; providers?: string[] }) => {
        calls.push(`pin ${cid} ${parameters.nodeUrl} ${parameters.providers?.join(",")}`);
        if (refuse) throw Object.assign(new Error("nobody served it"), { name: "DataNotFoundError" });
        return {};
      },
      removeData: async (cid: string) => calls.push(`remove ${cid}`),
    } as unknown as NodeDataActions;
    const lines: string[] = [];
    const copies = new CheckpointCopies("http://127.0.0.1:9001", actions, store, (line) => lines.push(line));
    let answer: unknown[] = [checkpointToWire(await sign(lease, 1n, CIDS[0]!))];
    const ctx = { ...context(() => ({ state: "running", checkpoints: answer })), checkpointCopies: copies } as SuanliContext;
    await refreshCheckpoint(ctx, lease);
    await copies.idle(6n, 5_000);
    assert.deepEqual(calls, [`pin ${CIDS[0]} http://127.0.0.1:9001 /ip4/127.0.0.1/tcp/4006/p2p/${PEER}`], "fetched from the lease's provider");
    assert.deepEqual([lease.checkpointCopy?.checkpoint.record.cid, lease.checkpointCopy?.addrs], [CIDS[0], [`/ip4/127.0.0.1/tcp/9000/p2p/${PEER}`]]);
    await refreshCheckpoint(ctx, lease);
    await copies.idle(6n, 5_000);
    assert.equal(calls.length, 1, "the same record is not copied twice");
    answer = [...answer, checkpointToWire(await sign(lease, 2n, CIDS[1]!))];
    await refreshCheckpoint(ctx, lease);
    await copies.idle(6n, 5_000);
    assert.deepEqual(
      calls.slice(1),
      [`pin ${CIDS[1]} http://127.0.0.1:9001 /ip4/127.0.0.1/tcp/4006/p2p/${PEER}`, `remove ${CIDS[0]}`],
      "the older copy is unpinned once the newer is held",
    );
    refuse = true;
    answer = [...answer, checkpointToWire(await sign(lease, 3n, CIDS[2]!))];
    await refreshCheckpoint(ctx, lease);
    await copies.idle(6n, 5_000);
    assert.equal(lease.checkpoint?.record.cid, CIDS[2]);
    assert.equal(lease.checkpointCopy?.checkpoint.record.cid, CIDS[1], "the failed copy leaves the previous one");
    assert.match(lines.at(-1)!, /Could not copy checkpoint #3 .*DataNotFoundError/);
  });

  it("picks the newest record, or with preferCopies (its provider never reached) the copy on the renter's node; the node's addresses come first among the hints", async () => {
    const lease = attempt(7n);
    const ctx = context(() => ({ state: "running" }));
    const node = `/ip4/127.0.0.1/tcp/9000/p2p/${PEER}`;
    lease.checkpoint = await sign(lease, 3n, CIDS[1]!);
    lease.checkpointCopy = { checkpoint: await sign(lease, 2n, CIDS[0]!), nodeUrl: "http://127.0.0.1:9001", addrs: [node] };
    const newest = await pickCheckpoint(ctx, { attempts: [lease] });
    assert.deepEqual([newest?.cid, newest?.seq], [CIDS[1], 3n]);
    assert.deepEqual(newest?.hints, [node, `/ip4/127.0.0.1/tcp/4007/p2p/${PEER}`]);
    const copy = await pickCheckpoint(ctx, { attempts: [lease] }, { preferCopies: true });
    assert.deepEqual([copy?.cid, copy?.seq], [CIDS[0], 2n]);
    // The newest could not be fetched by a resumed lease: the copy next, whatever the preference.
    const retry = attempt(8n);
    Object.assign(retry, { resumedFrom: CIDS[1], migratedBecause: CHECKPOINT_UNAVAILABLE });
    assert.equal((await pickCheckpoint(ctx, { attempts: [lease, retry] }))?.cid, CIDS[0]);
    // A copy's record edited by hand is not used.
    lease.checkpointCopy.checkpoint = { ...lease.checkpointCopy.checkpoint, record: { ...lease.checkpointCopy.checkpoint.record, cid: CIDS[2]! } };
    assert.equal((await pickCheckpoint(ctx, { attempts: [lease] }, { preferCopies: true }))?.cid, CIDS[1]);
  });

  it("the resumed spec: resumeFrom and hints set, or both removed to start from the beginning; the spec refuses bad hints", () => {
    const spec = taskSpecSchema.parse({
      image: "busybox",
      command: "true",
      checkpoint: { periodSeconds: 10 },
      resumeFrom: CIDS[0],
      resumeHints: [`/ip4/10.0.0.1/tcp/1/p2p/${PEER}`],
    });
    const point = { cid: CIDS[1]!, leaseId: 1n, provider: renter.address, source: "checkpoint" as const, seq: 1n, time: 1n, hints: [`/ip4/127.0.0.1/tcp/2/p2p/${PEER}`] };
    const resumed = resumedSpec(spec, point);
    assert.equal(resumed.resumeFrom, CIDS[1]);
    assert.deepEqual(resumed.resumeHints, point.hints);
    assert.deepEqual(taskSpecSchema.parse(resumed), resumed);
    const fresh: TaskSpec = resumedSpec(spec, null);
    assert.equal("resumeFrom" in fresh || "resumeHints" in fresh, false);
    assert.deepEqual(fresh.checkpoint, { periodSeconds: 10 }, "it still checkpoints");
    const refused = (hints: unknown, from: { resumeFrom?: string } = { resumeFrom: CIDS[0] }) =>
      taskSpecSchema.safeParse({ image: "busybox", command: "true", ...from, resumeHints: hints });
    assert.equal(refused([`/ip4/127.0.0.1/tcp/2`]).success, false, "no /p2p/ peer id");
    assert.equal(refused(["not a multiaddr/p2p/" + PEER]).success, false);
    assert.equal(refused(Array.from({ length: 9 }, (_, i) => `/ip4/127.0.0.1/tcp/${i + 1}/p2p/${PEER}`)).success, false, "at most 8");
    const orphan = refused([`/ip4/127.0.0.1/tcp/2/p2p/${PEER}`], {});
    assert.equal(orphan.success, false);
    assert.deepEqual(
      orphan.error?.issues.map((issue) => issue.path.join(".")),
      ["resumeHints"],
    );
  });
});
