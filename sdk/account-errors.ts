/** The errors of smart-account renters (sdk/internal/simple-account.ts, passkey-account.ts), exported by sdk/errors.ts. */
import { SuanliError } from "../common/errors.js";

/**
 * A smart account (`createClient({ smartAccount })`) could not do what was asked (a signature it cannot make, a bad owner key).
 *
 * @example
 * import { createClient, SmartAccountError } from "suanli/sdk";
 * try {
 *   await client.submitTask(parameters);
 * } catch (error) {
 *   if (error instanceof SmartAccountError) console.error(error.shortMessage);
 * }
 */
export class SmartAccountError extends SuanliError {
  override name = "SmartAccountError";
}

/**
 * The passkey did not sign a user operation (prompt dismissed or timed out, user verification refused): nothing was sent.
 *
 * @example
 * import { createClient, PasskeySignatureError } from "suanli/sdk";
 * try {
 *   await client.submitTask(parameters);
 * } catch (error) {
 *   if (error instanceof PasskeySignatureError) console.error("Approve it on your device to try again:", error.shortMessage);
 * }
 */
export class PasskeySignatureError extends SmartAccountError {
  override name = "PasskeySignatureError";
}
