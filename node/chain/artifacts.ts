import { readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { SuanliError } from "../../common/errors.js";
import { ABI_SOURCES } from "../../scripts/gen-abi.js";

const ARTIFACTS_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../artifacts");

export class ArtifactError extends SuanliError {
  override name = "ArtifactError";
}

/** The creation bytecode of a compiled contract, read from Hardhat's artifacts. */
export async function readBytecode(contract: keyof typeof ABI_SOURCES | string): Promise<`0x${string}`> {
  const file = ABI_SOURCES[contract];
  if (!file) throw new ArtifactError(`Unknown contract ${contract}`);
  try {
    const artifact = JSON.parse(await readFile(path.join(ARTIFACTS_DIR, file), "utf8")) as { bytecode: `0x${string}` };
    return artifact.bytecode;
  } catch (error) {
    throw new ArtifactError(`No compiled artifact for ${contract}`, {
      cause: error,
      metaMessages: ["Compile the contracts first: `npm run build`."],
    });
  }
}
