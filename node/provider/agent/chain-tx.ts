/**
 * The provider's transactions, one at a time: simulated first (a revert is known before gas is
 * spent and comes back as the contract's custom error), then sent and awaited. One wallet, one
 * queue, so two transactions never race for the same account nonce.
 */
import type { Abi, Account, Address, Chain, ContractFunctionName, PublicClient, TransactionReceipt, Transport, WalletClient } from "viem";
import { revertName as decodeRevertName, sendContract, type ContractWrite } from "../../../common/chain/tx.js";
import type { Logger } from "../../log/logger.js";
import type { Metrics } from "../../metrics/metrics.js";
import { ChainTransactionError } from "./errors.js";

/** The contract's custom error name inside an error (a ChainTransactionError or a viem error), if any. */
export function revertName(error: unknown): string | undefined {
  if (error instanceof ChainTransactionError) return error.errorName;
  return decodeRevertName(error);
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
  send<const abi extends Abi, name extends ContractFunctionName<abi, "nonpayable" | "payable">>(call: ContractWrite<abi, name>): Promise<TransactionReceipt> {
    const run = this.queue.then(
      () => this.sendNow(call),
      () => this.sendNow(call),
    );
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async sendNow<const abi extends Abi, name extends ContractFunctionName<abi, "nonpayable" | "payable">>(call: ContractWrite<abi, name>): Promise<TransactionReceipt> {
    const { metrics, logger } = this.options;
    const functionName: string = call.functionName;
    try {
      const receipt = await sendContract(this.options, call);
      metrics.providerTransactions.inc({ function: functionName, outcome: "ok" });
      logger.debug("Transaction sent", { function: functionName, hash: receipt.transactionHash, block: receipt.blockNumber });
      return receipt;
    } catch (error) {
      const name = revertName(error);
      metrics.providerTransactions.inc({ function: functionName, outcome: name ?? "error" });
      throw new ChainTransactionError(functionName, name, error);
    }
  }
}
