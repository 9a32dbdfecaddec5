/**
 * The provider's lease loop decision (node/provider/agent/lease-step.ts), without a chain: every
 * lease state this node can be in against every state the chain can report, and the actions
 * `nextStep` plans for each. The expected cells are written out by hand from the rules in
 * docs/provider.md and docs/architecture.md, not computed.
 */
import assert from "node:assert/strict";
import type { LeaseView } from "../../common/chain/market.js";
import { InvalidInputError } from "../../common/errors.js";
import {
  blameOf,
  BundleDigestMismatchError,
  BundleFetchError,
  BundleTooLargeError,
  BundleUnpackError,
  CommandNotFoundError,
  FetchRefusedError,
  RuntimeUnavailableError,
  UnitsBusyError,
} from "../../node/provider/errors.js";
import { nextStep, type LeaseAction, type LocalLease, type StepClock } from "../../node/provider/agent/lease-step.js";
import { chainFields, newLeaseRecord, type LeaseRecord } from "../../node/provider/agent/records.js";

const NOW_S = 1_000_000;
const NOW: StepClock = { wallMs: NOW_S * 1000, blockTimestamp: NOW_S };
const MARGIN_S = 30;

function view(overrides: Partial<LeaseView>): LeaseView {
  return {
    leaseId: 7n,
    renter: "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC",
    provider: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
    machineId: 1,
    units: 1,
    pricePerUnitSecond: 100n,
    interruptible: false,
    collateralBps: 1_000,
    collateral: 0n,
    deposit: 60_000n,
    paid: 0n,
    startDeadline: NOW_S + 600,
    activatedAt: 0,
    stopAt: 0,
    end: 0,
    duration: 600,
    status: "Open",
    endReason: "None",
    accrued: 0n,
    claimable: 0n,
    ...overrides,
  };
}

/** The chain states a lease can be read in (Open split by where its start deadline is). */
const CHAIN: Record<string, LeaseView> = {
  "Open, deadline far": view({ status: "Open" }),
  "Open, deadline near": view({ status: "Open", startDeadline: NOW_S + 10 }),
  "Open, deadline passed": view({ status: "Open", startDeadline: NOW_S - 10 }),
  Active: view({ status: "Active", activatedAt: NOW_S - 100, end: NOW_S + 500 }),
  "Ended (closed)": view({ status: "Ended", endReason: "RenterClosed", activatedAt: NOW_S - 100, stopAt: NOW_S - 5, end: NOW_S - 5 }),
  "Ended (preempted, notice running)": view({ status: "Ended", endReason: "Preempted", activatedAt: NOW_S - 100, stopAt: NOW_S + 60, end: NOW_S + 60 }),
  // Released: paid in full (deposit is the provider's total), no collateral held.
  Settled: view({ status: "Settled", endReason: "Completed", activatedAt: NOW_S - 100, stopAt: NOW_S - 5, end: NOW_S - 5, deposit: 9_500n, paid: 9_500n }),
  Cancelled: view({ status: "Cancelled", endReason: "MissedStart", startDeadline: NOW_S - 10 }),
  None: view({ status: "None" }),
};

type Local = { record: Partial<LeaseRecord>; task?: LocalLease["task"] };
const running = { handleState: "running" as const, aborted: false, abortReason: undefined };
const preparing = { handleState: undefined, aborted: false, abortReason: undefined };
const succeeded = { status: "succeeded" as const, chainExitCode: 0, outputDigest: `0x${"1".repeat(64)}` as const, unitSeconds: 10 };

/** The lease states of this node: the record's phase and end action, and whether a task runs in this process. */
const LOCAL: Record<string, Local> = {
  "waiting for a spec": { record: { phase: "waiting_spec" } },
  "preparing (pipeline live)": { record: { phase: "preparing", unitIds: ["u0"] }, task: preparing },
  "preparing, no pipeline (restart)": { record: { phase: "preparing", unitIds: ["u0"] } },
  "starting, no pipeline (restart)": { record: { phase: "starting", unitIds: ["u0"] } },
  "running (task live)": { record: { phase: "running", unitIds: ["u0"] }, task: running },
  "running, no task (restart)": { record: { phase: "running", unitIds: ["u0"] } },
  "running, already being stopped": { record: { phase: "running", unitIds: ["u0"] }, task: { handleState: "running", aborted: true, abortReason: "lease-ended" } },
  "ended, nothing to send": { record: { phase: "ended", state: "succeeded", endAction: "none", result: succeeded } },
  "ended, to complete": { record: { phase: "ended", state: "succeeded", endAction: "complete", result: succeeded } },
  "ended, to terminate": { record: { phase: "ended", state: "failed", endAction: "terminate" } },
  "ended, renter cancelled (grace running)": { record: { phase: "ended", state: "stopped", endAction: "await_close", endAfter: NOW_S * 1000 + 60_000 } },
  "ended, units released": { record: { phase: "ended", state: "succeeded", endAction: "none", released: true } },
};

const ended = (state: "stopped" | "preempted", reason: string) => `mark-ended(${state}: LeaseEndedError ${reason})`;

/** Expected plans: LOCAL row × CHAIN column. */
const EXPECTED: Record<string, Record<string, string>> = {
  "waiting for a spec": {
    "Open, deadline far": "",
    "Open, deadline near": "activate(no-spec) hold-units",
    "Open, deadline passed": "activate(no-spec) hold-units",
    Active: "hold-units",
    "Ended (closed)": `${ended("stopped", "RenterClosed")} release-units`,
    "Ended (preempted, notice running)": `${ended("preempted", "Preempted")} release-units`,
    Settled: `${ended("stopped", "Completed")} release-units close`,
    Cancelled: `${ended("stopped", "MissedStart")} release-units close`,
    None: "",
  },
  "preparing (pipeline live)": {
    "Open, deadline far": "",
    "Open, deadline near": "activate(preparing)",
    "Open, deadline passed": "activate(preparing)",
    Active: "",
    "Ended (closed)": "stop-task",
    "Ended (preempted, notice running)": "stop-task",
    Settled: "stop-task",
    Cancelled: "stop-task",
    None: "",
  },
  "preparing, no pipeline (restart)": {
    "Open, deadline far": "recover",
    "Open, deadline near": "recover",
    "Open, deadline passed": "recover",
    Active: "recover",
    "Ended (closed)": `${ended("stopped", "RenterClosed")} release-units`,
    "Ended (preempted, notice running)": `${ended("preempted", "Preempted")} release-units`,
    Settled: `${ended("stopped", "Completed")} release-units close`,
    Cancelled: `${ended("stopped", "MissedStart")} release-units close`,
    None: "",
  },
  "starting, no pipeline (restart)": {
    "Open, deadline far": "recover",
    "Open, deadline near": "recover",
    "Open, deadline passed": "recover",
    Active: "recover",
    "Ended (closed)": `${ended("stopped", "RenterClosed")} release-units`,
    "Ended (preempted, notice running)": `${ended("preempted", "Preempted")} release-units`,
    Settled: `${ended("stopped", "Completed")} release-units close`,
    Cancelled: `${ended("stopped", "MissedStart")} release-units close`,
    None: "",
  },
  "running (task live)": {
    "Open, deadline far": "",
    "Open, deadline near": "",
    "Open, deadline passed": "",
    Active: "",
    "Ended (closed)": "stop-task",
    "Ended (preempted, notice running)": "preempt-task(60000ms)",
    Settled: "stop-task",
    Cancelled: "stop-task",
    None: "",
  },
  "running, no task (restart)": {
    "Open, deadline far": "recover",
    "Open, deadline near": "recover",
    "Open, deadline passed": "recover",
    Active: "recover",
    "Ended (closed)": `${ended("stopped", "RenterClosed")} release-units`,
    "Ended (preempted, notice running)": `${ended("preempted", "Preempted")} release-units`,
    Settled: `${ended("stopped", "Completed")} release-units close`,
    Cancelled: `${ended("stopped", "MissedStart")} release-units close`,
    None: "",
  },
  "running, already being stopped": {
    "Open, deadline far": "",
    "Open, deadline near": "",
    "Open, deadline passed": "",
    Active: "",
    "Ended (closed)": "",
    "Ended (preempted, notice running)": "",
    Settled: "",
    Cancelled: "",
    None: "",
  },
  "ended, nothing to send": {
    "Open, deadline far": "",
    "Open, deadline near": "",
    "Open, deadline passed": "",
    Active: "",
    "Ended (closed)": "release-units",
    "Ended (preempted, notice running)": "release-units",
    Settled: "release-units close",
    Cancelled: "release-units close",
    None: "",
  },
  "ended, to complete": {
    "Open, deadline far": "complete(activate first)",
    "Open, deadline near": "complete(activate first)",
    "Open, deadline passed": "set-end-action(none)",
    Active: "complete",
    "Ended (closed)": "mark-ended(as is) release-units",
    "Ended (preempted, notice running)": "mark-ended(as is) release-units",
    Settled: "mark-ended(as is) release-units close",
    Cancelled: "mark-ended(as is) release-units close",
    None: "",
  },
  "ended, to terminate": {
    "Open, deadline far": "terminate",
    "Open, deadline near": "terminate",
    "Open, deadline passed": "terminate",
    Active: "terminate",
    "Ended (closed)": "mark-ended(as is) release-units",
    "Ended (preempted, notice running)": "mark-ended(as is) release-units",
    Settled: "mark-ended(as is) release-units close",
    Cancelled: "mark-ended(as is) release-units close",
    None: "",
  },
  "ended, renter cancelled (grace running)": {
    "Open, deadline far": "",
    "Open, deadline near": "set-end-action(complete) complete(activate first)",
    "Open, deadline passed": "set-end-action(none)",
    Active: "",
    "Ended (closed)": "mark-ended(as is) release-units",
    "Ended (preempted, notice running)": "mark-ended(as is) release-units",
    Settled: "mark-ended(as is) release-units close",
    Cancelled: "mark-ended(as is) release-units close",
    None: "",
  },
  "ended, units released": {
    "Open, deadline far": "",
    "Open, deadline near": "",
    "Open, deadline passed": "",
    Active: "",
    "Ended (closed)": "",
    "Ended (preempted, notice running)": "",
    Settled: "close",
    Cancelled: "close",
    None: "",
  },
};

function show(action: LeaseAction): string {
  switch (action.kind) {
    case "activate":
      return `activate(${action.why})`;
    case "shrink":
      return `shrink(${action.units})`;
    case "set-end-action":
      return `set-end-action(${action.endAction})`;
    case "complete":
      return action.activateFirst ? "complete(activate first)" : "complete";
    case "preempt-task":
      return `preempt-task(${action.noticeMs}ms)`;
    case "mark-ended":
      return action.state === null ? "mark-ended(as is)" : `mark-ended(${action.state}: ${action.error?.name} ${/\((\w+)\)/.exec(action.error?.message ?? "")?.[1] ?? ""})`;
    default:
      return action.kind;
  }
}

/** A record that has caught up with `chain` (so the plan holds no `sync`), with `overrides` on top. */
function recordFor(chain: LeaseView, overrides: Partial<LeaseRecord>): LeaseRecord {
  const base = newLeaseRecord({ ...chain, status: chain.status === "None" ? "Open" : chain.status }, 1n, 0);
  return { ...base, chain: chainFields(chain), units: chain.units, ...overrides };
}

function plan(local: Local, chain: LeaseView, options: { stopping?: boolean; now?: StepClock } = {}): string {
  const lease: LocalLease = { record: recordFor(chain, local.record), task: local.task, stopping: options.stopping ?? false, activateMarginSeconds: MARGIN_S };
  return nextStep(lease, chain, options.now ?? NOW)
    .map(show)
    .join(" ");
}

describe("provider lease loop: nextStep(record, chain, now)", () => {
  it("has an expected plan for every lease state against every chain state", () => {
    assert.deepEqual(Object.keys(EXPECTED).sort(), Object.keys(LOCAL).sort(), "every lease state has a row");
    for (const row of Object.values(EXPECTED)) assert.deepEqual(Object.keys(row).sort(), Object.keys(CHAIN).sort(), "every chain state has a column");
  });

  for (const [localName, local] of Object.entries(LOCAL)) {
    describe(`lease ${localName}`, () => {
      for (const [chainName, chain] of Object.entries(CHAIN)) {
        it(`chain ${chainName} → ${EXPECTED[localName]![chainName] || "nothing"}`, () => {
          assert.equal(plan(local, chain), EXPECTED[localName]![chainName]);
        });
      }
    });
  }

  it("writes the chain's view into the record when it changed, and tells a running task a moved end", () => {
    const active = CHAIN.Active!;
    const extended = { ...active, end: active!.end + 300, deposit: active!.deposit + 30_000n };
    const lease = (chainEnd: number): LocalLease => ({
      record: { ...recordFor(active!, { phase: "running", unitIds: ["u0"] }), chain: { ...chainFields(active!), end: chainEnd } },
      task: running,
      stopping: false,
      activateMarginSeconds: MARGIN_S,
    });
    assert.equal(nextStep(lease(active!.end), extended, NOW).map(show).join(" "), "sync extend");
    // The first read after the activation (the record still says end 0): no extension, just the sync.
    assert.equal(nextStep(lease(0), extended, NOW).map(show).join(" "), "sync");
  });

  it("gives back units the renter released, keeping the first ones", () => {
    const active = CHAIN.Active;
    const record = { ...recordFor(active!, { phase: "waiting_spec", unitIds: ["u0", "u1"], devices: ["0", "1"] }), units: 2 };
    assert.equal(nextStep({ record, stopping: false, activateMarginSeconds: MARGIN_S }, active!, NOW).map(show).join(" "), "sync shrink(1)");
  });

  it("while the node stops, starts nothing and recovers nothing, but still ends leases whose task is over", () => {
    assert.equal(plan(LOCAL["running, no task (restart)"]!, CHAIN.Active!, { stopping: true }), "");
    assert.equal(plan(LOCAL["waiting for a spec"]!, CHAIN["Open, deadline near"]!, { stopping: true }), "");
    assert.equal(plan(LOCAL["ended, to complete"]!, CHAIN.Active!, { stopping: true }), "complete");
    assert.equal(plan(LOCAL["running (task live)"]!, CHAIN["Ended (closed)"]!, { stopping: true }), "stop-task");
  });

  it("completes a cancelled lease once the renter's grace is over", () => {
    const graceOver = { record: { ...LOCAL["ended, renter cancelled (grace running)"]!.record, endAfter: NOW_S * 1000 - 1 } };
    assert.equal(plan(graceOver, CHAIN.Active!), "set-end-action(complete) complete");
  });

  it("reports a task stopped at the end of its time only once that end has come", () => {
    const exceeded = { record: { phase: "ended" as const, state: "exceeded" as const, endAction: "complete" as const, result: { ...succeeded, status: "exceeded" as const } } };
    assert.equal(plan(exceeded, CHAIN.Active!), "");
    assert.equal(plan(exceeded, CHAIN.Active!, { now: { wallMs: (CHAIN.Active!.end + 1) * 1000, blockTimestamp: CHAIN.Active!.end + 1 } }), "complete");
  });

  it("lets a preempted task stop at once when its notice is over", () => {
    const noticeOver = { wallMs: (NOW_S + 61) * 1000, blockTimestamp: NOW_S + 61 };
    assert.equal(plan(LOCAL["running (task live)"]!, CHAIN["Ended (preempted, notice running)"]!, { now: noticeOver }), "stop-task");
    // The chain's clock ahead of ours shortens the notice to what the chain says is left.
    assert.equal(
      plan(LOCAL["running (task live)"]!, CHAIN["Ended (preempted, notice running)"]!, { now: { wallMs: NOW_S * 1000, blockTimestamp: NOW_S + 20 } }),
      "preempt-task(40000ms)",
    );
  });

  it("keeps the record of a held lease open until the releasing claim, with or without collateral (issue #34)", () => {
    const released = CHAIN.Settled!;
    // A completion (or an expiry) inside the fault window: its last window's pay and its collateral are held.
    const held = { ...released, deposit: 9_500n, paid: 0n, collateral: 950n };
    const heldNoCollateral = { ...held, collateral: 0n };
    const expired = { ...held, endReason: "Expired" as const };
    const done = LOCAL["ended, units released"]!;
    for (const chain of [held, heldNoCollateral, expired]) assert.equal(plan(done, chain), "");
    assert.equal(plan(done, released), "close");
  });

  it("plans nothing for a closed record", () => {
    assert.equal(plan({ record: { phase: "ended", closed: true } }, CHAIN.Settled!), "");
  });
});

describe("provider lease loop: who pays when a task cannot start", () => {
  it("errors of the renter's input carry blame renter (the lease ends with a completion report); anything else is the provider's (it terminates)", () => {
    const renters = [
      new BundleDigestMismatchError("http://x/b.tgz", "aa"),
      new BundleFetchError("http://x/b.tgz", "the server could not be reached or did not serve the file"),
      new BundleTooLargeError("The bundle", 10),
      new BundleUnpackError("not a tar.gz"),
      new CommandNotFoundError("python3", "the workspace"),
      new FetchRefusedError("http://10.0.0.1/b.tgz", "a private address"),
      new InvalidInputError("task", [{ path: "env.X", message: "does not open" }]),
    ];
    for (const error of renters) assert.equal(blameOf(error), "renter", error.name);
    for (const error of [new RuntimeUnavailableError("container", "docker is not running"), new UnitsBusyError(["u0"], "held by lease-1"), new Error("ENOSPC"), "a string"])
      assert.equal(blameOf(error), "provider", String(error));
  });
});
