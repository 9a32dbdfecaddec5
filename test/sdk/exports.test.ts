/**
 * Snapshot of the SDK's public API, both entries: a name added, removed or renamed fails here, so
 * a change to what dApps import is always deliberate (update the list and the package version).
 */
import assert from "node:assert/strict";
import path from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** Values (runtime exports) and types of both `suanli/sdk` and `suanli/sdk/browser`. */
const SHARED_VALUES = [
  "AllocationError",
  "BundlerError",
  "ClientConfigError",
  "CompletionMismatchError",
  "GroupExtendError",
  "InsufficientBalanceError",
  "InsufficientGasError",
  "InvalidInputError",
  "NetworkUnreachableError",
  "NoMatchError",
  "NoWalletError",
  "NothingOwedError",
  "OutputDigestMismatchError",
  "OutputDownloadError",
  "OutputUnverifiableError",
  "PasskeySignatureError",
  "ProviderRequestError",
  "SmartAccountError",
  "SuanliError",
  "TaskIoUnsupportedError",
  "TaskStateError",
  "TransactionError",
  "UnknownTaskError",
  "UnknownTemplateError",
  "WaitTimeoutError",
  "cancelTask",
  "createClient",
  "extendTask",
  "getOwed",
  "getTaskStatus",
  "listTemplates",
  "matchOffers",
  "parseSubmitParameters",
  "queryOffers",
  "settleTask",
  "signLeaseRequest",
  "streamLogs",
  "suanliDomain",
  "suanliTypes",
  "submitTask",
  "templateTask",
  "waitForTask",
  "withdrawOwed",
  "startSession",
  "useSession",
  "endSession",
  "revokeSession",
  "signSessionDelegation",
  "delegationHash",
  "SESSION_ACTIONS",
  "SESSION_MAX_SECONDS",
  "DEFAULT_SESSION_ACTIONS",
  "SessionDelegationError",
  "GatewayRequestError",
  "createEndpoint",
  "mintEndpointToken",
  "revokeEndpointToken",
  "deleteEndpoint",
  "getGateway",
  "getEndpointStats",
  "deployEndpoint",
  "endpointId",
];
const SHARED_TYPES = [
  "CreateClientParameters",
  "ExtendTaskParameters",
  "ExtendTaskReturnType",
  "MatchOffersReturnType",
  "OfferSummary",
  "QueryOffersParameters",
  "RenterRequestSigner",
  "StreamLogsParameters",
  "SuanliClient",
  "SubmitTaskParameters",
  "SubmitTaskReturnType",
  "TaskAttempt",
  "TaskLogLine",
  "TaskReceipt",
  "TaskRecord",
  "TaskStatus",
  "Template",
  "TemplateTaskParameters",
  "TemplateTaskReturnType",
  "WaitForTaskParameters",
  "WithdrawOwedParameters",
  "WithdrawOwedReturnType",
  "Session",
  "StartSessionParameters",
  "RevokeSessionParameters",
  "RevokeSessionReturnType",
  "SessionAction",
  "SignedDelegation",
  "SessionDelegationSigner",
  "CreateEndpointParameters",
  "CreateEndpointReturnType",
  "DeployEndpointParameters",
  "DeployedEndpoint",
  "AutoscalerEvent",
  "AutoscaledReplica",
  "GatewayInfo",
  "EndpointStats",
];
/**
 * `suanli/sdk` only: the task I/O actions (node:fs, node:net, libp2p streams; a browser client's
 * methods throw TaskIoUnsupportedError instead) and the state file's error.
 */
const NODE_ONLY_VALUES = [
  "CheckpointSignatureError",
  "CheckpointsUnavailableError",
  "DataIntegrityError",
  "DataRequestError",
  "NoCheckpointError",
  "ResumeSecretsError",
  "TaskStillRunningError",
  "TaskStoreMismatchError",
  "addData",
  "downloadOutput",
  "execTask",
  "forwardPort",
  "getCheckpoints",
  "getData",
  "listData",
  "pinData",
  "removeData",
  "resumeTask",
  "resumeTaskParametersSchema",
];
const NODE_ONLY_TYPES = [
  "AddDataParameters",
  "AddDataReturnType",
  "DataNodeParameters",
  "DataProgress",
  "DownloadOutputParameters",
  "DownloadOutputReturnType",
  "ExecTaskParameters",
  "ExecTaskReturnType",
  "ForwardPortParameters",
  "ForwardPortReturnType",
  "GetCheckpointsReturnType",
  "GetDataParameters",
  "GetDataReturnType",
  "ListDataReturnType",
  "PinDataParameters",
  "PinDataReturnType",
  "RemoveDataReturnType",
  "ResumeTaskParameters",
  "ResumeTaskReturnType",
  "SignedCheckpoint",
];
const ENTRIES = {
  "sdk/index.ts": { module: "../../sdk/index.js", values: [...SHARED_VALUES, ...NODE_ONLY_VALUES], types: [...SHARED_TYPES, ...NODE_ONLY_TYPES] },
  "sdk/browser.ts": { module: "../../sdk/browser.js", values: SHARED_VALUES, types: SHARED_TYPES },
} as const;

const options: ts.CompilerOptions = {
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  target: ts.ScriptTarget.ES2022,
  noEmit: true,
  noLib: true,
  types: [],
};

/** Every name an entry exports, types included, as the compiler sees it. */
function exportedNames(entry: string): string[] {
  const file = path.join(root, entry);
  const program = ts.createProgram({ rootNames: [file], options });
  const checker = program.getTypeChecker();
  const symbol = checker.getSymbolAtLocation(program.getSourceFile(file)!);
  assert.ok(symbol, `${entry} is not a module`);
  return checker
    .getExportsOfModule(symbol)
    .map((exported) => exported.name)
    .sort();
}

describe("SDK public API snapshot (suanli/sdk, suanli/sdk/browser)", function () {
  this.timeout(120_000);

  for (const [entry, { module, values, types }] of Object.entries(ENTRIES)) {
    it(`${entry} exports exactly the pinned values and types`, async () => {
      assert.deepEqual(exportedNames(entry), [...values, ...types].sort());
      const runtime = (await import(module)) as Record<string, unknown>;
      assert.deepEqual(Object.keys(runtime).sort(), [...values].sort());
    });
  }

  it("the browser entry's createClient refuses libp2p and files instead of loading them", async () => {
    const browser = await import("../../sdk/browser.js");
    const node = await import("../../sdk/index.js");
    assert.notEqual(browser.createClient, node.createClient);
    assert.equal(browser.NoMatchError, node.NoMatchError, "one error class for both entries: instanceof works across them");
    const deployment = {
      chainId: 31337,
      deploymentBlock: "1",
      deployedAt: "2026-01-01T00:00:00.000Z",
      deployer: `0x${"1".repeat(40)}`,
      contracts: { token: `0x${"2".repeat(40)}`, market: `0x${"3".repeat(40)}`, registry: `0x${"4".repeat(40)}` },
      token: { symbol: "tUSD", decimals: 6 },
    };
    const chain = { id: 31337, name: "devnet", nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 }, rpcUrls: { default: { http: ["http://127.0.0.1:1"] } } };
    await assert.rejects(browser.createClient({ chain: chain as never, deployment: deployment, bootstrap: [] }), { name: "ClientConfigError", message: /nodeUrl/ });
    await assert.rejects(browser.createClient({ chain: chain as never, bootstrap: [] }), { name: "ClientConfigError", message: /deployment manifest object/ });
  });
});
