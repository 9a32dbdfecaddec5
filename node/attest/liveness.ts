/**
 * The path test/contracts/AttestorStaking.faults.test.ts imports MAX_FAULT_WINDOW_SECONDS from
 * (test/contracts/ is frozen while the contracts' CI run depends on it). The probes live in
 * faults/liveness.ts; import them from faults/index.ts.
 */
export { MAX_FAULT_WINDOW_SECONDS } from "./faults/index.js";
