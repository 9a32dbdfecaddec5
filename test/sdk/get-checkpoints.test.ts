/**
 * getCheckpoints (docs/data.md): the SDK keeps only records the lease's provider signed. The
 * provider's answer is stood in for (the real provider path is test/node/provider-checkpoints.test.ts);
 * signing and recovery are real (viem, this deployment's EIP-712 domain).
 */
import assert from "node:assert/strict";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { checkpointToWire, signCheckpoint } from "../../common/attest/checkpoint.js";
import { suanliDomain } from "../../common/eip712.js";
import { InvalidInputError } from "../../common/errors.js";
import { getCheckpoints } from "../../sdk/actions/getCheckpoints.js";
import { parseSubmitParameters } from "../../sdk/actions/submitTask.js";
import type { SuanliContext } from "../../sdk/internal/context.js";
import { checkpointsText } from "../../node/cli/commands/checkpoints.js";

const domain = suanliDomain(31337, "0x00000000000000000000000000000000000000aa");
const provider = privateKeyToAccount(generatePrivateKey());
const renter = privateKeyToAccount(generatePrivateKey());
const cid = "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy";

function context(checkpoints: unknown[], checkpointError?: { name: string; message: string }): SuanliContext {
  const attempt = { leaseId: 7n, provider: provider.address, peerId: "12D3KooWtest", addrs: ["/ip4/127.0.0.1/tcp/4001", "/ip4/127.0.0.1/tcp/4002/p2p/12D3KooWtest"] };
  return {
    domain,
    account: renter,
    walletClient: { signTypedData: (parameters: Parameters<typeof renter.signTypedData>[0]) => renter.signTypedData(parameters) },
    tasks: { get: async (taskId: string) => (taskId === "task-1" ? { taskId, attempts: [attempt] } : undefined) },
    link: { status: async () => ({ checkpoints, ...(checkpointError ? { checkpointError } : {}) }) },
  } as unknown as SuanliContext;
}

describe("sdk: getCheckpoints", () => {
  it("returns the records the lease's provider signed, newest first, and the CLI prints them", async () => {
    const one = await signCheckpoint(provider, domain, { leaseId: 7n, seq: 1n, cid, bytes: 10n, time: 1_000n });
    const two = await signCheckpoint(provider, domain, { leaseId: 7n, seq: 2n, cid, bytes: 12n, time: 2_000n });
    const answer = await getCheckpoints(context([checkpointToWire(one), checkpointToWire(two)], { name: "CheckpointQuotaError", message: "over" }), "task-1");
    assert.deepEqual(
      answer.checkpoints.map((c) => c.record.seq),
      [2n, 1n],
    );
    assert.equal(answer.newest?.record.seq, 2n);
    assert.equal(answer.error?.name, "CheckpointQuotaError");
    // The hints to fetch or pin the newest CID from the provider (pinData's providers): every address names the peer.
    assert.deepEqual(answer.providerAddrs, ["/ip4/127.0.0.1/tcp/4001/p2p/12D3KooWtest", "/ip4/127.0.0.1/tcp/4002/p2p/12D3KooWtest"]);
    const text = checkpointsText(answer);
    assert.match(text, /2 checkpoint\(s\), signatures verified/);
    assert.match(text, new RegExp(`--resume-from ${cid}`));
    assert.match(text, /npx suanli resume task-1/);
  });

  it("throws CheckpointSignatureError for a record signed by anyone else, or altered", async () => {
    const forged = await signCheckpoint(renter, domain, { leaseId: 7n, seq: 3n, cid, bytes: 12n, time: 3_000n });
    await assert.rejects(getCheckpoints(context([checkpointToWire(forged)]), "task-1"), { name: "CheckpointSignatureError" });
    const honest = checkpointToWire(await signCheckpoint(provider, domain, { leaseId: 7n, seq: 1n, cid, bytes: 10n, time: 1_000n }));
    await assert.rejects(getCheckpoints(context([{ ...honest, record: { ...honest.record, bytes: "11" } }]), "task-1"), { name: "CheckpointSignatureError" });
    // A record of another lease, even signed by the provider, is not this task's.
    const other = checkpointToWire(await signCheckpoint(provider, domain, { leaseId: 8n, seq: 1n, cid, bytes: 10n, time: 1_000n }));
    await assert.rejects(getCheckpoints(context([other]), "task-1"), { name: "CheckpointSignatureError" });
    const none = await getCheckpoints(context([]), "task-1");
    assert.equal(none.newest, null);
  });

  it("submitTask passes resumeFrom and the checkpoint period into the spec, and refuses a bad CID or a period under the floor, naming the field", () => {
    const base = { gpuType: "A100", gpuCount: 1, duration: 3600, maxPricePerGpuHour: "3.60", image: "busybox", command: "true" };
    const { spec } = parseSubmitParameters({ ...base, resumeFrom: cid, checkpointPeriodSeconds: 60 });
    assert.equal(spec.resumeFrom, cid);
    assert.deepEqual(spec.checkpoint, { periodSeconds: 60 });
    assert.equal(parseSubmitParameters(base).spec.resumeFrom, undefined);
    assert.throws(
      () => parseSubmitParameters({ ...base, resumeFrom: "nope" }),
      (e: unknown) => e instanceof InvalidInputError && e.fields.includes("resumeFrom"),
    );
    assert.throws(
      () => parseSubmitParameters({ ...base, checkpointPeriodSeconds: 2 }),
      (e: unknown) => e instanceof InvalidInputError && e.fields.includes("checkpoint.periodSeconds"),
    );
  });
});
