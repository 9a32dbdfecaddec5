// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.34;

/// @title ILeaseMarketTypes
/// @notice The enums, structs, events and errors of the LeaseMarket (shared by LeaseMarket and
///         LeaseMarketExtension, which run on one storage).
interface ILeaseMarketTypes {
    /// @notice Where a lease is in its life.
    enum LeaseStatus {
        /// @dev No such lease.
        None,
        /// @dev Deposit escrowed, units and collateral reserved, waiting for the provider to activate.
        Open,
        /// @dev Accruing units x price every second, up to the deposit.
        Active,
        /// @dev Units and collateral released, the renter refunded; the provider still has accrued money to claim
        ///      (after a preemption it keeps accruing until stopAt).
        Ended,
        /// @dev Everything paid out. After a completion the provider's collateral stays locked until
        ///      stopAt + FAULT_SUBMISSION_WINDOW (a fault observed before it may still land), then claim releases it.
        Settled,
        /// @dev Ended before it was ever active; everything went back to the renter.
        Cancelled
    }

    /// @notice Why a lease ended.
    enum EndReason {
        None,
        /// @dev The renter closed it.
        RenterClosed,
        /// @dev The provider reported completion.
        Completed,
        /// @dev A quorum of attestors signed a fault.
        Faulted,
        /// @dev An on-demand lease or a higher interruptible bid took its units.
        Preempted,
        /// @dev Its deposit ran out (the paid-for duration is over).
        Expired,
        /// @dev The provider ended it without cause.
        Terminated,
        /// @dev The provider did not activate it before the start deadline.
        MissedStart,
        /// @dev Renter and provider co-signed a final amount.
        CoSigned
    }

    /// @notice A provider's signed offer for one machine (EIP-712 type `Offer`, common/eip712.ts).
    struct Offer {
        address provider;
        uint32 machineId;
        bytes32 model;
        uint96 pricePerUnitSecond;
        /// @dev Lowest interruptible bid accepted; zero: no interruptible capacity.
        uint96 minBidPerUnitSecond;
        uint32 minDuration;
        uint32 maxDuration;
        uint16 collateralBps;
        /// @dev The lease's start deadline is its open time plus this.
        uint32 startWindow;
        uint64 nonce;
        uint32 expiry;
        /// @dev Zero: anyone may use it (reusable until expiry or revocation). Else only this renter, once.
        address renter;
    }

    /// @notice What the renter asks for when opening a lease.
    struct LeaseTerms {
        uint16 units;
        /// @dev Seconds of service the deposit pays for.
        uint32 duration;
        /// @dev The renter's price cap per unit-second.
        uint96 maxPricePerUnitSecond;
        bool interruptible;
        /// @dev The interruptible price per unit-second (ignored for on-demand leases).
        uint96 bidPerUnitSecond;
        /// @dev Leases of the same machine to free first, in order, while free units are short:
        ///      interruptible leases with a lower bid (any bid for an on-demand opener), and leases past their end.
        uint256[] preempt;
    }

    /// @notice An attestor's statement that a lease's provider failed at observedAt (EIP-712 type `Fault`).
    struct Fault {
        uint256 leaseId;
        uint8 kind;
        uint32 observedAt;
    }

    /// @notice Renter and provider agree the provider gets providerAmount in total (EIP-712 type `Settlement`).
    struct Settlement {
        uint256 leaseId;
        uint96 providerAmount;
        uint32 deadline;
    }

    /// @notice An EIP-2612 permit of the renter for this contract.
    struct Permit {
        uint256 value;
        uint256 deadline;
        uint8 v;
        bytes32 r;
        bytes32 s;
    }

    /// @notice Governance parameters of the market.
    struct MarketParams {
        /// @dev Share of every payment to providers that goes to the treasury (at most MAX_PROTOCOL_FEE_BPS).
        uint16 protocolFeeBps;
        /// @dev Share of the collateral paid to the renter when the provider misses the start deadline.
        uint16 startPenaltyBps;
        /// @dev Lowest share of the collateral a quorum fault credits to the renter.
        uint16 faultMinCreditBps;
        /// @dev Seconds a preempted interruptible lease keeps running (and accruing).
        uint32 preemptionNotice;
        /// @dev Receives the protocol fee; may be zero while the fee is zero.
        address treasury;
    }

    /// @notice A lease as the off-chain code reads it.
    struct LeaseView {
        address renter;
        address provider;
        uint32 machineId;
        uint16 units;
        uint96 pricePerUnitSecond;
        bool interruptible;
        uint16 collateralBps;
        /// @dev Collateral locked now (zero once ended, except a completion's until stopAt + FAULT_SUBMISSION_WINDOW).
        uint96 collateral;
        /// @dev Escrowed so far; once ended, the provider's final total.
        uint96 deposit;
        uint96 paid;
        /// @dev Set while Open.
        uint32 startDeadline;
        /// @dev Start of metering (moved to the shrink time by shrink); zero while Open.
        uint32 activatedAt;
        /// @dev When accrual stopped or stops; zero while Open or Active.
        uint32 stopAt;
        /// @dev When the deposit runs out if nothing else ends the lease: activatedAt + deposit / (units x price).
        ///      While Open: zero. Once ended: stopAt.
        uint32 end;
        /// @dev Seconds the deposit pays for from activatedAt (while Open: from activation).
        uint32 duration;
        LeaseStatus status;
        EndReason endReason;
        /// @dev Provider's total so far (paid included).
        uint96 accrued;
        /// @dev accrued - paid, before the protocol fee.
        uint96 claimable;
    }

    // ---------------------------------------------------------------- events

    /// @notice A lease was opened; its units and collateral are reserved.
    event LeaseOpened(
        uint256 indexed leaseId,
        address indexed provider,
        address indexed renter,
        uint32 machineId,
        uint16 units,
        uint96 pricePerUnitSecond,
        bool interruptible,
        uint96 deposit,
        uint96 collateral,
        uint32 startDeadline,
        uint64 offerNonce
    );
    /// @notice The provider started the lease; accrual runs from activatedAt until end.
    event LeaseActivated(uint256 indexed leaseId, uint32 activatedAt, uint32 end);
    /// @notice An interruptible lease was preempted by `byLeaseId`: it runs and accrues until stopAt
    ///         (the notice), everything after that was refunded.
    event LeasePreempted(uint256 indexed leaseId, uint256 indexed byLeaseId, uint32 stopAt);
    /// @notice A lease ended: accrual stops at stopAt, the provider's total is providerTotal, the renter was
    ///         refunded `refund` and credited `credit` from the provider's collateral.
    event LeaseEnded(
        uint256 indexed leaseId, EndReason reason, uint32 stopAt, uint96 providerTotal, uint96 refund, uint96 credit
    );
    /// @notice The provider was paid `amount` of a lease, of which `fee` went to the treasury.
    event LeaseClaimed(uint256 indexed leaseId, address indexed provider, uint96 amount, uint96 fee);
    /// @notice The renter added `extraSeconds` of service for `extraDeposit`; end is the new end (zero while Open).
    event LeaseExtended(uint256 indexed leaseId, uint32 extraSeconds, uint96 extraDeposit, uint32 end);
    /// @notice The renter released units: the lease now holds `units`; the released share was refunded.
    event LeaseShrunk(uint256 indexed leaseId, uint16 units, uint96 refund);
    /// @notice Renter and provider settled at providerAmount; `refund` went back to the renter.
    event LeaseSettled(uint256 indexed leaseId, uint96 providerAmount, uint96 refund);
    /// @notice The provider reported the lease's result (common/eip712.ts Completion).
    event CompletionReported(uint256 indexed leaseId, int32 exitCode, bytes32 outputDigest, uint64 unitSeconds);
    /// @notice A completion's hold ended (FAULT_SUBMISSION_WINDOW after it without a fault, or co-signed by the
    ///         renter): the collateral went back to the provider; `counted` is true when the lease ran to its end or
    ///         the renter co-signed, the only completions reputation counts.
    event CompletionReleased(uint256 indexed leaseId, bool counted);
    /// @notice A quorum fault ended a lease; `credit` of the provider's collateral went to the renter.
    event FaultSubmitted(uint256 indexed leaseId, uint8 kind, uint32 observedAt, uint96 credit);
    /// @notice Governance changed the market parameters.
    event MarketParamsChanged(MarketParams params);
    /// @notice A payment to `to` failed (the token refused it); it is owed to `to`, which pulls it with withdraw.
    event PaymentDeferred(address indexed to, uint256 amount);
    /// @notice `account` withdrew `amount` it was owed, sent to `to`.
    event OwedWithdrawn(address indexed account, address indexed to, uint256 amount);

    // ---------------------------------------------------------------- errors

    /// @notice The offer expired at `expiry`.
    error OfferExpired(uint32 expiry, uint256 timestamp);
    /// @notice The offer is bound to `renter`, not the caller.
    error OfferNotForRenter(address renter, address caller);
    /// @notice The signature was made by `recovered` (zero: malformed), not `expected`.
    error InvalidSignature(address expected, address recovered);
    /// @notice A lease needs at least one unit.
    error ZeroUnits();
    /// @notice `duration` is outside the offer's [minDuration, maxDuration].
    error DurationOutOfRange(uint32 duration, uint32 minDuration, uint32 maxDuration);
    /// @notice The offer sells no interruptible capacity on `machineId`.
    error InterruptibleNotOffered(uint32 machineId);
    /// @notice The bid is below the offer's minimum bid.
    error BidTooLow(uint96 bid, uint96 minBid);
    /// @notice The offer's price is zero.
    error ZeroPrice();
    /// @notice The price exceeds the renter's cap.
    error PriceAboveCap(uint96 price, uint96 cap);
    /// @notice At most `max` leases may be listed for preemption.
    error TooManyPreemptions(uint256 count, uint256 max);
    /// @notice Lease `leaseId` is not on machine `machineId`.
    error PreemptWrongMachine(uint256 leaseId, uint32 machineId);
    /// @notice Lease `leaseId` may not be preempted by this lease (on-demand, or bid not below the new bid).
    error NotPreemptible(uint256 leaseId);
    /// @notice What a preempting bid (an interruptible lease) owes at least (min(preemptionNotice, duration) seconds of its units x price)
    ///         is below `evicted`, the notice of the leases it would evict (each one's units x price x
    ///         min(preemptionNotice, its time left)): eviction is priced by what it evicts.
    error PreemptionUnderpriced(uint256 owed, uint256 evicted);
    /// @notice The lease is `status`, which this operation does not accept.
    error InvalidLeaseStatus(uint256 leaseId, LeaseStatus status);
    /// @notice Only the lease's renter may do this.
    error NotRenter(uint256 leaseId, address caller);
    /// @notice Only the lease's provider may do this.
    error NotProvider(uint256 leaseId, address caller);
    /// @notice The start deadline passed; the lease can only be cancelled.
    error StartDeadlinePassed(uint256 leaseId, uint32 startDeadline);
    /// @notice The start deadline has not passed yet.
    error StartDeadlineNotPassed(uint256 leaseId, uint32 startDeadline);
    /// @notice The lease's deposit ran out at `end`; claim it instead.
    error LeaseExpired(uint256 leaseId, uint32 end);
    /// @notice Nothing has accrued since the last claim.
    error NothingToClaim(uint256 leaseId);
    /// @notice At most `max` leases per batch.
    error BatchTooLarge(uint256 count, uint256 max);
    /// @notice The extension's offer is for another provider or machine than the lease.
    error OfferForOtherMachine(uint256 leaseId, address provider, uint32 machineId);
    /// @notice An extension needs at least one second.
    error ZeroExtension();
    /// @notice The consenting offer's price is above the lease's price.
    error ExtensionPriceTooHigh(uint96 offerPrice, uint96 leasePrice);
    /// @notice Shrinking needs 0 < newUnits < units.
    error InvalidShrink(uint16 newUnits, uint16 units);
    /// @notice A fault's observedAt must be in [from, to].
    error FaultObservedOutOfRange(uint32 observedAt, uint256 from, uint256 to);
    /// @notice `kind` is no defined fault kind: 1 (unresponsive) and 2 (capacity) only (common/eip712.ts FaultKind),
    ///         each of which AttestorStaking can prove false with the signer's own contradicting receipt.
    error InvalidFaultKind(uint8 kind);
    /// @notice At most `max` signatures per fault.
    error TooManySignatures(uint256 count, uint256 max);
    /// @notice `signer` signed twice.
    error DuplicateSigner(address signer);
    /// @notice Signatures must be ordered by strictly increasing signer address.
    error SignersNotAscending(address previous, address signer);
    /// @notice `signer` is not an attestor.
    error NotAttestor(address signer);
    /// @notice `signers` distinct attestor signatures; `quorum` needed.
    error FaultQuorumNotMet(uint256 signers, uint256 quorum);
    /// @notice The settlement's deadline passed.
    error SettlementExpired(uint32 deadline, uint256 timestamp);
    /// @notice A settlement pays the provider between what it was paid and the deposit.
    error SettlementAmountOutOfRange(uint96 providerAmount, uint96 paid, uint96 deposit);
    /// @notice Only governance (the registry's DEFAULT_ADMIN_ROLE) may do this.
    error NotGovernance(address caller);
    /// @notice A parameter is out of range: `value` above `max`.
    error ParamOutOfRange(string name, uint256 value, uint256 max);
    /// @notice A nonzero protocol fee needs a treasury.
    error ZeroTreasury();
    /// @notice LeaseMarketExtension code runs only by delegatecall from the LeaseMarket.
    error NotDelegated();
    /// @notice A fault observed at `observedAt` had to be submitted by `deadline` (FAULT_SUBMISSION_WINDOW).
    error FaultSubmissionClosed(uint32 observedAt, uint256 deadline);
    /// @notice The consenting offer locks less collateral per deposit than the lease (`leaseCollateralBps`).
    error ExtensionCollateralTooLow(uint16 offerCollateralBps, uint16 leaseCollateralBps);
    /// @notice The offer's start window is shorter than MIN_START_WINDOW.
    error StartWindowTooShort(uint32 startWindow, uint32 min);
    /// @notice A lease that preempted another cannot shrink before it has paid its notice period on all its
    ///         units: never while Open, and once Active not before `paidFrom`.
    error PreemptionNoticeUnpaid(uint256 leaseId, uint256 paidFrom);
    /// @notice A reserved-term lease (its offer's minDuration at least MIN_COMMITMENT) cannot shrink before its
    ///         commitment is served, at `servedFrom`.
    error CommitmentUnserved(uint256 leaseId, uint256 servedFrom);
    /// @notice Nothing is owed to `account`.
    error NothingOwed(address account);
    /// @notice The market received `received` of a `expected` transfer (fee-on-transfer tokens are not supported).
    error TokenTransferShortfall(uint256 expected, uint256 received);
    /// @notice A completed lease's collateral is held until `until` (faults observed before the completion may
    ///         land until then).
    error CollateralHeld(uint256 leaseId, uint256 until);
    /// @notice A provider cannot preempt a lease it serves to another renter (it would end it without the
    ///         termination or start penalty): it terminates it instead.
    error SelfPreemption(uint256 leaseId);
    /// @notice The extension was built for registry `extensionRegistry`, not `registry`.
    error ExtensionMismatch(address registry, address extensionRegistry);
}
