import { SuanliError } from "../../common/errors.js";

/** A deployment step failed or was refused before anything was sent (a bad token, an unsafe setting). */
export class DeployError extends SuanliError {
  override name = "DeployError";
}
