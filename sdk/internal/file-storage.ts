/**
 * Task records in a JSON file (Node only: the browser entry never imports this module).
 */
import { describeBinding, sameBinding, type DeploymentBinding } from "../../common/deployment.js";
import { parseTagged, stringifyTagged } from "../../common/json.js";
import { TaskStoreMismatchError, type TaskFile, type TaskRecord, type TaskStorage } from "./store.js";

/**
 * A JSON file (Node only), written atomically, bound to one deployment: a file of another
 * deployment (or of a version that did not record one) is refused with TaskStoreMismatchError.
 */
export function fileTaskStorage(file: string, binding: DeploymentBinding): TaskStorage {
  return {
    async load() {
      const { readFile } = await import("node:fs/promises");
      let text: string;
      try {
        text = await readFile(file, "utf8");
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
        throw error;
      }
      const stored = parseTagged<TaskFile | TaskRecord[]>(text);
      const fix = `Use another state file for this chain, or, if the old chain is gone for good, delete ${file}.`;
      if (Array.isArray(stored)) {
        throw new TaskStoreMismatchError(`The task file ${file} does not say which deployment its tasks belong to (written by an older version)`, {
          metaMessages: [fix],
        });
      }
      if (!sameBinding(stored.deployment, binding)) {
        throw new TaskStoreMismatchError(`The task file ${file} holds another deployment's tasks`, {
          metaMessages: [`Stored: ${describeBinding(stored.deployment)}`, `Chain:  ${describeBinding(binding)}`, fix],
        });
      }
      return stored.tasks;
    },
    async save(records) {
      const { mkdir, rename, writeFile } = await import("node:fs/promises");
      const path = await import("node:path");
      await mkdir(path.dirname(file), { recursive: true });
      const temp = `${file}.${process.pid}.tmp`;
      await writeFile(temp, stringifyTagged({ deployment: binding, tasks: records } satisfies TaskFile), { mode: 0o600 });
      await rename(temp, file);
    },
  };
}
