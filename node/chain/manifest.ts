import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { DeploymentError, parseDeployment, serializeDeployment, type Deployment } from "../../common/deployment.js";

/** The package's own `deployments/` folder: the default manifest directory. */
export const DEFAULT_DEPLOYMENTS_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../deployments");

export function manifestPath(dir: string, chainId: number): string {
  return path.join(dir, `${chainId}.json`);
}

/** Reads and validates `<dir>/<chainId>.json`. */
export async function readDeployment(dir: string, chainId: number): Promise<Deployment> {
  const file = manifestPath(dir, chainId);
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch {
    throw new DeploymentError(`No deployment manifest for chain ${chainId} at ${file}`, {
      metaMessages: ["Deploy first: `npm run chain` in one terminal, then `npm run deploy`.", "Or point --chain.deploymentsDir at the folder that holds <chainId>.json."],
    });
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new DeploymentError(`Deployment manifest ${file} is not valid JSON`, { cause: error });
  }
  const deployment = parseDeployment(json, `deployment manifest ${file}`);
  if (deployment.chainId !== chainId) {
    throw new DeploymentError(`Deployment manifest ${file} is for chain ${deployment.chainId}, not ${chainId}`);
  }
  return deployment;
}

/** Writes the manifest atomically (temp file + rename), so readers never see half a file. */
export async function writeDeployment(dir: string, deployment: Deployment): Promise<string> {
  await mkdir(dir, { recursive: true });
  const file = manifestPath(dir, deployment.chainId);
  const temp = `${file}.${process.pid}.tmp`;
  await writeFile(temp, serializeDeployment(deployment));
  await rename(temp, file);
  return file;
}
