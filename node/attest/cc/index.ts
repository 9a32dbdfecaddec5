/**
 * GPU identity (entry point of node/attest/cc/): the attestor's checks of confidential-computing
 * evidence in a commit (cc-policy.ts over cc-evidence, cc-nvidia, cc-rim, cc-revocation, cc-mode)
 * and the registry of which machine presented each GPU last (device-registry.ts). Depends on
 * nothing else in node/attest.
 */
export { checkCommitEvidence, loadCcPolicy, type CcPolicy, type CcVerifiedUnit } from "./cc-policy.js";
export { DeviceRegistry, uuidKey } from "./device-registry.js";
export { ccOptionsSchema, type CcOptions } from "./options.js";
