/**
 * Suanli's renter and dApp SDK (Node entry: libp2p, files). Browsers: `suanli/sdk/browser`.
 *
 * @example
 * import { createClient } from "suanli/sdk";
 * import { privateKeyToAccount } from "viem/accounts";
 * const client = await createClient({ rpcUrl, account: privateKeyToAccount(key), bootstrap });
 * const { taskId } = await client.submitTask({ gpuType: "A100", gpuCount: 1, duration: 600,
 *   maxPricePerGpuHour: "2.5", bundleUrl, sha256, command: "python train.py" });
 * console.log(await client.wait(taskId));
 */
export { createClient } from "./node.js";
export { ClientConfigError, type CreateClientParameters, type SuanliClient } from "./client.js";
export * from "./errors.js";
export type { SubmitTaskParameters, SubmitTaskReturnType, TaskAttempt, TaskReceipt, TaskStatus } from "./types.js";
export type { OfferSummary, QueryOffersParameters } from "./actions/queryOffers.js";
export type { MatchOffersReturnType } from "./actions/matchOffers.js";
export type { StreamLogsParameters, TaskLogLine } from "./actions/streamLogs.js";
export type { WaitForTaskParameters } from "./actions/waitForTask.js";
export type { ExtendTaskParameters, ExtendTaskReturnType } from "./actions/extendTask.js";
export { TaskStoreMismatchError, type TaskRecord } from "./internal/store.js";
export type { ExecTaskParameters, ExecTaskReturnType } from "./actions/execTask.js";
export type { ForwardPortParameters, ForwardPortReturnType } from "./actions/forwardPort.js";
export type { DownloadOutputParameters, DownloadOutputReturnType } from "./actions/downloadOutput.js";
export { submitTask, parseSubmitParameters } from "./actions/submitTask.js";
export { listTemplates, templateTask, type TemplateTaskParameters, type TemplateTaskReturnType } from "./actions/templates.js";
export { UnknownTemplateError, type Template } from "../common/templates/catalog.js";
export { getTaskStatus } from "./actions/getTaskStatus.js";
export { getCheckpoints, CheckpointsUnavailableError, type GetCheckpointsReturnType } from "./actions/getCheckpoints.js";
export { CheckpointSignatureError, type SignedCheckpoint } from "../common/attest/checkpoint.js";
export {
  resumeTask,
  resumeTaskParametersSchema,
  NoCheckpointError,
  ResumeSecretsError,
  TaskStillRunningError,
  type ResumeTaskParameters,
  type ResumeTaskReturnType,
} from "./actions/resumeTask.js";
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
export { downloadOutput } from "./actions/downloadOutput.js";
export { execTask } from "./actions/execTask.js";
export { forwardPort } from "./actions/forwardPort.js";
export { signLeaseRequest, type RenterRequestSigner } from "../common/protocols/lease.js";
export { suanliDomain, suanliTypes } from "../common/eip712.js";
export { addData, type AddDataParameters, type AddDataReturnType, type DataProgress } from "./actions/addData.js";
export { listData, type DataNodeParameters, type ListDataReturnType } from "./actions/listData.js";
export { removeData, type RemoveDataReturnType } from "./actions/removeData.js";
export { pinData, type PinDataParameters, type PinDataReturnType } from "./actions/pinData.js";
export { getData, type GetDataParameters, type GetDataReturnType } from "./actions/getData.js";
export { DataIntegrityError, DataRequestError } from "./internal/data.js";
