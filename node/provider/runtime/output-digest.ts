/** The output digest rule lives in common/ so that the SDK recomputes it with the same code. */
export { digestOutputDir, digestOutputFiles, listOutputFiles, StreamDigest, type OutputFile } from "../../../common/output-digest.js";
