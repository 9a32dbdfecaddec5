/**
 * *Download results*: the browser SDK reads the task's output through this node's relay into memory,
 * recomputes its digest and checks it against the chain's completion report (or the provider's
 * signed one); each file becomes a link that saves it (docs/console.md).
 */
import { $ } from "./dom.js";
import { describe, show, state } from "./state.js";

export async function downloadSelected(): Promise<void> {
  const taskId = state.selected;
  if (!taskId) return;
  show("#task-error", undefined);
  const list = $("#task-files");
  for (const link of list.querySelectorAll("a")) URL.revokeObjectURL(link.href);
  list.replaceChildren();
  $("#task-message").textContent = "Downloading the results…";
  try {
    // Through this node's relay into memory; the SDK recomputes the digest and checks it against
    // the provider's signed completion report and the chain (verified), or says it is a snapshot.
    const result = await state.client!.downloadOutput(taskId, {
      onProgress: ({ bytes, totalBytes }) => ($("#task-message").textContent = `Downloading the results… ${bytes} of ${totalBytes} bytes`),
    });
    for (const file of result.files) {
      const item = document.createElement("li");
      const link = document.createElement("a");
      link.href = URL.createObjectURL(new Blob([new Uint8Array(file.data ?? [])], { type: "application/octet-stream" }));
      link.download = file.path.split("/").pop() || "output";
      link.textContent = `${file.path} (${file.size} bytes)`;
      item.append(link);
      list.append(item);
    }
    const check = result.verified
      ? `verified against ${result.verifiedAgainst === "chain" ? "the chain's completion report" : "the provider's signed completion report"} (digest ${result.digest})`
      : result.snapshot
        ? "UNVERIFIED: a snapshot of a running task (nothing is signed until it ends)"
        : "UNVERIFIED";
    $("#task-message").textContent = `Downloaded ${result.files.length} file(s), ${result.bytes} bytes, ${check}.`;
  } catch (error) {
    $("#task-message").textContent = "";
    show("#task-error", describe(error));
  }
}
