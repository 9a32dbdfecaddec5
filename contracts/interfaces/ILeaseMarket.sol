// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.34;

import {ILeaseMarketTypes} from "./ILeaseMarketTypes.sol";

/// @title ILeaseMarket
/// @notice Escrow and per-second metering of GPU leases. A lease moves Open -> Active -> Ended -> Settled,
///         or Open -> Cancelled. Every end refunds the renter's unaccrued deposit in the same transaction.
///         EIP-712 domain: name "Suanli", version "1", the chain id, this contract (common/eip712.ts).
interface ILeaseMarket is ILeaseMarketTypes {
    // ---------------------------------------------------------------- lease life

    /// @notice Opens a lease on a provider's signed offer; pulls the deposit (approve this contract first),
    ///         reserves units and locks collateral = deposit x collateralBps / 10000 of the provider's stake.
    /// @param offer The provider's offer.
    /// @param signature The provider's EIP-712 signature of `offer`.
    /// @param terms Units, duration, price cap, mode and the leases to preempt.
    /// @return leaseId The new lease.
    function openLease(Offer calldata offer, bytes calldata signature, LeaseTerms calldata terms)
        external
        returns (uint256 leaseId);

    /// @notice `openLease` after an EIP-2612 permit of the caller (a failing permit is ignored: the
    ///         allowance may already be there, e.g. when someone front-ran the permit).
    /// @param offer The provider's offer.
    /// @param signature The provider's EIP-712 signature of `offer`.
    /// @param terms Units, duration, price cap, mode and the leases to preempt.
    /// @param permit The caller's permit for this contract, covering the deposit.
    /// @return leaseId The new lease.
    function openLeaseWithPermit(
        Offer calldata offer,
        bytes calldata signature,
        LeaseTerms calldata terms,
        Permit calldata permit
    ) external returns (uint256 leaseId);

    /// @notice The provider starts an Open lease, no later than its start deadline. Accrual starts now.
    /// @param leaseId The lease.
    function activate(uint256 leaseId) external;

    /// @notice Pays the provider what the lease accrued since the last claim (anyone may call), up to
    ///         now - FAULT_SUBMISSION_WINDOW while a fault can still reach the lease: the last window's pay stays in
    ///         escrow, so a fault returns all pay after its observedAt to the renter. A lease
    ///         past its end is finalized, status Settled: its units are released; within FAULT_SUBMISSION_WINDOW of its
    ///         end it is held like a completion (its collateral and last window's pay, until end + the window), later
    ///         the collateral is released at once. A completed (or expired and held) lease whose hold is over
    ///         (FAULT_SUBMISSION_WINDOW after its stop) is released: collateral back to the provider (`CollateralHeld`
    ///         before that).
    /// @param leaseId The lease.
    function claim(uint256 leaseId) external;

    /// @notice `claim` for up to MAX_BATCH leases; leases with nothing to claim are skipped. Payments to
    ///         consecutive leases of one provider are made in one transfer.
    /// @param leaseIds The leases.
    function claimMany(uint256[] calldata leaseIds) external;

    /// @notice The renter ends the lease. Open: full refund. Active: accrual stops now, the unaccrued
    ///         deposit is refunded; the provider claims the rest. A lease that preempted another owes at least
    ///         min(preemptionNotice, duration) seconds of its units x price, even when closed before activation.
    ///         Active past its end: nothing is refunded; the lease is finalized as `claim` finalizes it.
    /// @param leaseId The lease.
    function close(uint256 leaseId) external;

    /// @notice The provider reports the result and ends the lease: accrual stops now (at the end if past it),
    ///         the provider is paid until stopAt - FAULT_SUBMISSION_WINDOW, the renter refunded and the units freed.
    ///         The collateral and the provider's last window's pay stay held FAULT_SUBMISSION_WINDOW more (a fault
    ///         observed before the completion still lands and takes back the pay after its observedAt), then `claim`
    ///         releases both. Reputation counts it as a completion only if the lease ran to its end (an early completion
    ///         the renter did not co-sign with `settle` counts unit-seconds, never a completion). The report mirrors
    ///         the signed Completion (common/eip712.ts).
    /// @param leaseId The lease.
    /// @param exitCode The task's exit code.
    /// @param outputDigest Digest of the task's output.
    /// @param unitSeconds Unit-seconds the provider measured (informational; billing is metered on-chain).
    function complete(uint256 leaseId, int32 exitCode, bytes32 outputDigest, uint64 unitSeconds) external;

    /// @notice Ends an Active lease on a quorum of attestors' signatures of `fault` (anyone may submit), at
    ///         most FAULT_SUBMISSION_WINDOW seconds after observedAt. Accrual stops at observedAt; the renter is
    ///         refunded and credited from the provider's collateral: collateral x max(remaining / promised,
    ///         faultMinCreditBps / 10000) on the lease as it was at observedAt (an extension made after
    ///         observedAt does not count), plus anything the provider claimed after observedAt, capped at the
    ///         collateral. A preempted lease in its notice period can be faulted too: accrual stops at
    ///         observedAt, without credit (its collateral was released at the preemption). So can a completed lease
    ///         whose collateral is still held, for a fault observed before its completion: credited as above on
    ///         the deposit before its latest extension (if any), the provider's pay after observedAt returned.
    ///         Only the defined kinds are taken (InvalidFaultKind otherwise): 1, unresponsive
    ///         (AttestorStaking.disputeFault proves one false with its signer's ProbeReceipt), and 2, capacity
    ///         (disputeCapacityFault, with its signer's Attestation of the leased machine).
    /// @param fault The fault.
    /// @param signatures At least faultQuorum attestor signatures, ordered by strictly increasing signer.
    function submitFault(Fault calldata fault, bytes[] calldata signatures) external;

    /// @notice The provider ends a lease without cause. Open: full refund plus the start penalty. Active:
    ///         accrual stops now, the provider is paid, the renter refunded plus a penalty of
    ///         collateral x remaining / promised time, on the lease as it was FAULT_SUBMISSION_WINDOW ago (a
    ///         younger extension does not count).
    /// @param leaseId The lease.
    function terminate(uint256 leaseId) external;

    /// @notice Cancels an Open lease whose start deadline passed (anyone may call; the money goes to the
    ///         renter): full refund plus collateral x startPenaltyBps / 10000.
    /// @param leaseId The lease.
    function cancel(uint256 leaseId) external;

    /// @notice Settles a lease at a co-signed amount: the provider gets providerAmount in total, the renter
    ///         the rest of the deposit (anyone may submit both signatures). A completed lease still held is
    ///         released at once, at providerAmount = paid, and counts as a completion (the renter co-signed it).
    /// @param settlement The settlement.
    /// @param renterSignature The renter's EIP-712 signature.
    /// @param providerSignature The provider's EIP-712 signature.
    function settle(Settlement calldata settlement, bytes calldata renterSignature, bytes calldata providerSignature)
        external;

    /// @notice The renter buys `extraSeconds` more; the provider's consent is a current offer for the same
    ///         machine whose maxDuration covers the new total, whose price (minimum bid for an interruptible
    ///         lease) is nonzero and not above the lease's, and whose collateralBps is at least the lease's.
    /// @param leaseId An Active lease before its end (an Open lease cannot be extended: close and reopen it).
    /// @param extraSeconds Seconds to add.
    /// @param offer The consenting offer.
    /// @param signature The provider's signature of `offer`.
    function extend(uint256 leaseId, uint32 extraSeconds, Offer calldata offer, bytes calldata signature) external;

    /// @notice The renter releases units early: what accrued is paid, metering restarts now for the
    ///         remaining units and time, and the released units' share of the rest is refunded.
    /// @param leaseId An Open lease, or an Active one before its end.
    /// @param newUnits Units to keep, 0 < newUnits < units.
    function shrink(uint256 leaseId, uint16 newUnits) external;

    // ---------------------------------------------------------------- governance

    /// @notice Sets the market parameters (governance: the registry's DEFAULT_ADMIN_ROLE).
    /// @param params The new parameters.
    function setParams(MarketParams calldata params) external;

    // ---------------------------------------------------------------- owed payments

    /// @notice Sends the caller what it is owed (payments the token refused to deliver) to `to`.
    /// @param to The receiver (the caller itself, or another address when the caller cannot receive).
    function withdraw(address to) external;

    /// @notice What `account` is owed: payments to it that the token refused, waiting for withdraw.
    /// @param account The account.
    /// @return Base units.
    function owed(address account) external view returns (uint256);

    // ---------------------------------------------------------------- views

    /// @notice A lease with its derived end, status, accrued and claimable amounts.
    /// @param leaseId The lease.
    /// @return The lease (status None if it does not exist).
    function getLease(uint256 leaseId) external view returns (LeaseView memory);

    /// @notice The provider's total for the lease so far, paid included.
    /// @param leaseId The lease.
    /// @return Base units.
    function accrued(uint256 leaseId) external view returns (uint96);

    /// @notice What a claim would pay now (before the protocol fee): the lagged amount (see claim); zero for a held
    ///         completion before its window has passed.
    /// @param leaseId The lease.
    /// @return Base units.
    function claimable(uint256 leaseId) external view returns (uint96);

    /// @notice The market parameters.
    /// @return The parameters.
    function params() external view returns (MarketParams memory);

    /// @notice The EIP-712 domain separator that offers, faults and settlements are signed under.
    /// @return The separator.
    function domainSeparator() external view returns (bytes32);

    /// @notice The id the next lease will get.
    /// @return The id.
    function nextLeaseId() external view returns (uint256);

    /// @notice The settlement token.
    /// @return The token's address.
    function token() external view returns (address);

    /// @notice The provider registry.
    /// @return The registry's address.
    function registry() external view returns (address);

    /// @notice The LeaseMarketExtension whose code runs the less frequent paths on this contract's storage.
    /// @return The extension's address.
    function extension() external view returns (address);
}
