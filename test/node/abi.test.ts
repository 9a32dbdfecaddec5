import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { ABI_MODULE_PATH, renderAbiModule } from "../../scripts/gen-abi.js";

describe("generated ABIs", () => {
  it("common/abi.ts matches the compiled artifacts (run `npm run build` if this fails)", async () => {
    assert.equal(await readFile(ABI_MODULE_PATH, "utf8"), await renderAbiModule());
  });
});
