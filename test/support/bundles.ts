/** Task bundles for tests: the demo's bundle server (node/demo/bundles.ts). */
export { startBundleServer, type BundleServer, type ServedBundle } from "../../node/demo/bundles.js";
