import type { HardhatPlugin } from "hardhat/types/plugins";
import type { CompilerOutput } from "hardhat/types/solidity";

/**
 * solc's warning 2394 ("Transient storage as defined by EIP-1153 can break the composability…", ten
 * lines) comes from OpenZeppelin's TransientSlot under ReentrancyGuardTransient, a guard cleared at
 * the end of every call: the use the warning itself calls safe. It printed on every build, demo,
 * devnet and deploy start, and a user can do nothing about it (issue #40 item 7). Our own contracts
 * write no transient storage. This plugin drops that one warning, by its code, from solc's output;
 * every other warning and error still prints, and the artifacts are the same.
 */
export const TRANSIENT_STORAGE_WARNING = "2394";

/** solc's output without warning 2394 (the same object when it has none). */
export function withoutTransientStorageWarning(output: CompilerOutput): CompilerOutput {
  if (output.errors === undefined) return output;
  const errors = output.errors.filter((e) => !(e.severity === "warning" && e.errorCode === TRANSIENT_STORAGE_WARNING));
  return errors.length === output.errors.length ? output : { ...output, errors };
}

const quietTransientStorageWarning: HardhatPlugin = {
  id: "suanli-quiet-transient-storage-warning",
  hookHandlers: {
    solidity: async () => ({
      default: async () => ({
        invokeSolc: async (context, compiler, solcInput, solcConfig, next) => withoutTransientStorageWarning(await next(context, compiler, solcInput, solcConfig)),
      }),
    }),
  },
};

export default quietTransientStorageWarning;
