/** The registry-backed ChainView lives in common/ so the SDK can validate offers too. */
export { RegistryChainView } from "../../common/chain/registry-view.js";
