import { SuanliError } from "../errors.js";

/** A claim names a GPU model this deployment does not know, so no deadline can be derived. */
export class UnknownGpuModelError extends SuanliError {
  override name = "UnknownGpuModelError";
  constructor(model: string, known: string[]) {
    super(`Unknown GPU model "${model}".`, { metaMessages: [`Known models: ${known.join(", ")}.`, "A MIG slice is written MODEL/PROFILE, e.g. A100-80GB/1g.10gb."] });
  }
}

/** The challenge parameters asked for are outside what the protocol allows (too many rows, bad shape). */
export class ChallengeParamsError extends SuanliError {
  override name = "ChallengeParamsError";
}
