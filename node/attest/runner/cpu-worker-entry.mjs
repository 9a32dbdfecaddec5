// Worker threads start from plain JavaScript: load the TypeScript worker through tsx's scoped
// loader, which works whether or not the parent process itself runs under tsx.
import { tsImport } from "tsx/esm/api";

await tsImport("./cpu-worker.ts", import.meta.url);
