/**
 * Suanli's renter and dApp SDK, browser entry: the Node entry's API less what needs Node, and the
 * client talks to a node's HTTP API (`nodeUrl`), never loading libp2p, Node's file system or sockets.
 * A browser client's `downloadOutput` goes through the node's relay routes into memory and is
 * verified as in Node (sdk/actions/downloadOutputRelay.ts). Node only (not exported here): the
 * task I/O actions downloadOutput (to a folder), execTask and forwardPort (a browser client's
 * `exec` and `forward` throw TaskIoUnsupportedError at once) and TaskStoreMismatchError (the
 * `stateFile` task records, a file).
 *
 * @example
 * import { createClient } from "suanli/sdk/browser";
 * import { custom } from "viem";
 * const client = await createClient({ rpcUrl, nodeUrl, account: address, walletTransport: custom(window.ethereum), deployment });
 */
export { createClient } from "./browser-client.js";
export { ClientConfigError, type CreateClientParameters, type SuanliClient } from "./client.js";
export * from "./errors.js";
export type { SubmitTaskParameters, SubmitTaskReturnType, TaskAttempt, TaskReceipt, TaskStatus } from "./types.js";
export type { OfferSummary, QueryOffersParameters } from "./actions/queryOffers.js";
export type { MatchOffersReturnType } from "./actions/matchOffers.js";
export type { StreamLogsParameters, TaskLogLine } from "./actions/streamLogs.js";
export type { WaitForTaskParameters } from "./actions/waitForTask.js";
export type { ExtendTaskParameters, ExtendTaskReturnType } from "./actions/extendTask.js";
export type { TaskRecord } from "./internal/store.js";
export { submitTask, parseSubmitParameters } from "./actions/submitTask.js";
export { listTemplates, templateTask, type TemplateTaskParameters, type TemplateTaskReturnType } from "./actions/templates.js";
export { UnknownTemplateError, type Template } from "../common/templates/catalog.js";
export { getTaskStatus } from "./actions/getTaskStatus.js";
export { streamLogs } from "./actions/streamLogs.js";
export { waitForTask } from "./actions/waitForTask.js";
export { cancelTask } from "./actions/cancelTask.js";
export { getOwed, withdrawOwed, type WithdrawOwedParameters, type WithdrawOwedReturnType } from "./actions/withdrawOwed.js";
export {
  startSession,
  useSession,
  endSession,
  revokeSession,
  DEFAULT_SESSION_ACTIONS,
  type Session,
  type StartSessionParameters,
  type RevokeSessionParameters,
  type RevokeSessionReturnType,
} from "./actions/sessions.js";
export {
  signSessionDelegation,
  delegationHash,
  SESSION_ACTIONS,
  SESSION_MAX_SECONDS,
  SessionDelegationError,
  type SessionAction,
  type SignedDelegation,
  type SessionDelegationSigner,
} from "../common/sessions.js";
export {
  createEndpoint,
  mintEndpointToken,
  revokeEndpointToken,
  deleteEndpoint,
  getGateway,
  getEndpointStats,
  type CreateEndpointParameters,
  type CreateEndpointReturnType,
} from "./actions/endpoints.js";
export { deployEndpoint, type DeployEndpointParameters, type DeployedEndpoint, type AutoscalerEvent, type AutoscaledReplica } from "./actions/deployEndpoint.js";
export { endpointId, type EndpointStats, type GatewayInfo } from "../common/endpoints.js";
export { extendTask } from "./actions/extendTask.js";
export { settleTask } from "./actions/settleTask.js";
export { queryOffers } from "./actions/queryOffers.js";
export { matchOffers } from "./actions/matchOffers.js";
export { signLeaseRequest, type RenterRequestSigner } from "../common/protocols/lease.js";
export { suanliDomain, suanliTypes } from "../common/eip712.js";
