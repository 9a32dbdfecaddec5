/**
 * The provider's transactions, one at a time: simulated first (a revert is known before gas is
 * spent and comes back as the contract's custom error), then sent and awaited. One wallet, one
 * queue, so two transactions never race for the same account nonce.
 */
import { BaseError, ContractFunctionRevertedError, type Abi, type Account, type Address, type Chain, type PublicClient, type TransactionReceipt, type Transport, type WalletClient } from "viem";
import { suanliErrorsAbi } from "../../../common/chain/market.js";
import type { Logger } from "../../log/logger.js";
import type { Metrics } from "../../metrics/metrics.js";
import { ChainTransactionError } from "./errors.js";

export type ContractCall = {
  address: Address;
  abi: Abi | readonly unknown[];
  functionName: string;
  args?: readonly unknown[];
};

/** The contract's custom error name inside a viem error, if any. */
export function revertName(error: unknown): string | undefined {
  if (error instanceof ChainTransactionError) return error.errorName;
  if (!(error instanceof BaseError)) return undefined;
  const reverted = error.walk((e) => e instanceof ContractFunctionRevertedError) as ContractFunctionRevertedError | null;
  return reverted?.data?.errorName ?? undefined;
}

export class TxSender {
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly options: {
      publicClient: PublicClient<Transport, Chain>;
      walletClient: WalletClient<Transport, Chain, Account>;
      metrics: Metrics;
      logger: Logger;
    },
  ) {}

  get address(): Address {
    return this.options.walletClient.account.address;
  }

  /** Simulates, sends and waits for one transaction; throws ChainTransactionError naming the revert. */
  send(call: ContractCall): Promise<TransactionReceipt> {
    const run = this.queue.then(
      () => this.sendNow(call),
      () => this.sendNow(call),
    );
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async sendNow(call: ContractCall): Promise<TransactionReceipt> {
    const { publicClient, walletClient, metrics, logger } = this.options;
    // The contract's own errors plus those bubbling up from the registry and the token.
    const abi = [...(call.abi as Abi).filter((item) => item.type !== "error"), ...suanliErrorsAbi] as Abi;
    try {
      const { request } = await publicClient.simulateContract({
        account: walletClient.account,
        address: call.address,
        abi,
        functionName: call.functionName,
        args: call.args ?? [],
      } as never);
      const hash = await walletClient.writeContract(request as never);
      const receipt = await publicClient.waitForTransactionReceipt({ hash, timeout: 120_000 });
      if (receipt.status !== "success") throw new Error(`transaction ${hash} reverted`);
      metrics.providerTransactions.inc({ function: call.functionName, outcome: "ok" });
      logger.debug("Transaction sent", { function: call.functionName, hash, block: receipt.blockNumber });
      return receipt;
    } catch (error) {
      const name = revertName(error);
      metrics.providerTransactions.inc({ function: call.functionName, outcome: name ?? "error" });
      throw new ChainTransactionError(call.functionName, name, error);
    }
  }
}
