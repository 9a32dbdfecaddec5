/**
 * Task records in a JSON file (Node only: the browser entry never imports this module).
 */
import { parseTagged, stringifyTagged } from "../../common/json.js";
import type { TaskRecord, TaskStorage } from "./store.js";

/** A JSON file (Node only), written atomically. */
export function fileTaskStorage(file: string): TaskStorage {
  return {
    async load() {
      const { readFile } = await import("node:fs/promises");
      try {
        return parseTagged<TaskRecord[]>(await readFile(file, "utf8"));
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
        throw error;
      }
    },
    async save(records) {
      const { mkdir, rename, writeFile } = await import("node:fs/promises");
      const path = await import("node:path");
      await mkdir(path.dirname(file), { recursive: true });
      const temp = `${file}.${process.pid}.tmp`;
      await writeFile(temp, stringifyTagged(records), { mode: 0o600 });
      await rename(temp, file);
    },
  };
}

