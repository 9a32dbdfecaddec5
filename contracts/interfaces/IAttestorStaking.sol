// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.34;

/// @title IAttestorStaking
/// @notice Attestors' stakes in the settlement token, the dispute game that slashes an attestor who signed an
///         attestation it cannot back with the provider's signed commit, and the immediate slash of an attestor whose
///         liveness fault its own probe receipt contradicts (docs/attestation.md, "Trust in attestors").
interface IAttestorStaking {
    /// @notice Governance parameters.
    /// @param minStake Active stake an attestor needs for its signatures to count (faults and attestations).
    /// @param slashAmount Taken from an attestor's stake (active, then unbonding) per lost dispute.
    /// @param disputeFee Bonded by a disputer: back to it when the attestor is slashed, to the attestor when it answers.
    /// @param answerWindow Seconds an attestor has to answer a dispute.
    /// @param unbondingDelay Seconds between an unstake request and its withdrawal (at least answerWindow).
    /// @param disputerShareBps Share of a fault dispute's slash paid to the lease's provider, the party the false fault
    ///        wronged (at most MAX_DISPUTER_SHARE_BPS); the rest, and all of an attestation dispute's slash, to sink.
    /// @param sink Receives the rest of a slash (a treasury, or a burn address).
    /// @param faultWindow Seconds an honest attestor hears nothing from a provider before it signs a liveness fault
    ///        (MIN_FAULT_WINDOW..MAX_FAULT_WINDOW): a receipt it signed in (observedAt, observedAt + faultWindow]
    ///        contradicts its fault (disputeFault). Attestors must wait at least this long (node/attest). A raise
    ///        applies to faults observed FAULT_WINDOW_RAISE_NOTICE after it (faultWindowFor); a lowering at once.
    struct Params {
        uint96 minStake;
        uint96 slashAmount;
        uint96 disputeFee;
        uint32 answerWindow;
        uint32 unbondingDelay;
        uint16 disputerShareBps;
        address sink;
        uint32 faultWindow;
    }

    /// @notice An attestor's statement that a lease's provider failed at observedAt: the market's EIP-712 `Fault`
    ///         (ILeaseMarketTypes.Fault, LeaseMarketBase.FAULT_TYPEHASH). Kind 1: unresponsive; kind 2: capacity.
    struct Fault {
        uint256 leaseId;
        uint8 kind;
        uint32 observedAt;
    }

    /// @notice An attestor's receipt of a provider's heartbeat that it counted as an answer to its probe `challenge`
    ///         of lease `leaseId`, at `receivedAtMs` (Unix milliseconds, the attestor's clock); EIP-712 `ProbeReceipt`
    ///         (common/eip712.ts) in the market's Suanli domain.
    struct ProbeReceipt {
        uint256 leaseId;
        bytes32 challenge;
        uint64 receivedAtMs;
    }

    /// @notice The Attestation an attestor signs (common/eip712.ts), in the market's Suanli EIP-712 domain.
    struct Attestation {
        address provider;
        uint32 machineId;
        bytes32 model;
        uint16 units;
        uint32 vramMiB;
        uint64 throughput;
        uint32 issuedAt;
        uint32 expiry;
        bytes32 challengeId;
        bytes32 root;
        bytes32 gpus;
        bytes32 cc;
        /// @dev Failed challenges of the machine this attestor holds in its failure history (the last
        ///      `failureHistorySeconds`, a week by default) when it signed; only time clears them.
        uint16 failures;
        /// @dev When the latest of them ended (Unix seconds), 0 with none.
        uint32 lastFailureAt;
    }

    /// @notice Where a dispute stands.
    enum DisputeState {
        None,
        Open,
        Answered,
        Slashed
    }

    /// @notice A dispute's state (keyed by the attestation's EIP-712 digest).
    /// @notice The provider's signed commit of a v2 challenge (common/attest/commit.ts, AttestCommitV2): one root and
    ///         one GPU UUID per unit, in unit order. `sortedOrder` lists the devices' indices in ascending byte order,
    ///         the order the attestation's `gpus` hash joins them in (unsigned: it only helps the contract check it).
    struct Commit {
        uint32 rowsPerUnit;
        bytes32[] roots;
        string[] devices;
        uint16[] sortedOrder;
    }

    struct Dispute {
        address attestor;
        uint32 answerBy;
        DisputeState state;
        address disputer;
        uint96 fee;
    }

    /// @notice An attestor's stake.
    struct StakeView {
        uint96 active;
        uint96 unbonding;
        uint32 unlockAt;
        uint32 openDisputes;
    }

    /// @notice An attestor's stake changed.
    event AttestorStakeChanged(address indexed attestor, uint96 active, uint96 unbonding, uint32 unlockAt);
    /// @notice `disputer` disputed the attestation with EIP-712 digest `id`, signed by `attestor` (machine and challenge
    ///         named so the attestor finds its record).
    event DisputeOpened(
        bytes32 indexed id, address indexed attestor, address indexed disputer, address provider, uint32 machineId, bytes32 challengeId, uint32 answerBy, uint96 fee
    );
    /// @notice The attestor answered with the provider's signed commit; the fee went to it.
    event DisputeAnswered(bytes32 indexed id, address indexed attestor, uint96 fee);
    /// @notice The attestor lost `amount` of its stake: it did not answer the attestation dispute `id` in time, or
    ///         (FaultDisputed) its receipt contradicted its fault, `id` being faultDisputeId of that fault and attestor.
    ///         `disputer` is who was credited `toDisputer`: the lease's provider for a fault; for an attestation the
    ///         disputer, credited nothing (toDisputer 0: all of it to the sink).
    event AttestorSlashed(bytes32 indexed id, address indexed attestor, uint96 amount, address disputer, uint96 toDisputer, address sink, uint96 toSink);
    /// @notice `disputer` (the caller; the share is credited to the lease's provider) proved with `attestor`'s own receipt
    ///         (a ProbeReceipt received at `receivedAtMs` for a liveness fault, an Attestation issued at receivedAtMs / 1000
    ///         s for a capacity fault) that its fault of
    ///         lease `leaseId` at `observedAt` was false; `slashed` was taken from its stake at once (AttestorSlashed,
    ///         emitted with it under the same id, says how it was split).
    event FaultDisputed(
        address indexed attestor, uint256 indexed leaseId, address indexed disputer, uint32 observedAt, uint64 receivedAtMs, uint96 slashed
    );
    /// @notice `account` took `amount` it was owed, paid to `to`.
    event Claimed(address indexed account, address to, uint256 amount);
    /// @notice Governance changed the parameters.
    event ParamsChanged(Params params);

    /// @notice Zero amount.
    error ZeroAmount();
    /// @notice `attestor` asked for `requested` but holds `active` active stake.
    error InsufficientStake(address attestor, uint96 active, uint96 requested);
    /// @notice Nothing is unbonding for `attestor`.
    error NothingToWithdraw(address attestor);
    /// @notice The unbonding stake unlocks at `unlockAt`.
    error StillUnbonding(address attestor, uint32 unlockAt);
    /// @notice `attestor` has `open` disputes to settle before it withdraws.
    error DisputesOpen(address attestor, uint32 open);
    /// @notice The contract received `received` of a `expected` transfer (fee-on-transfer tokens are not supported).
    error TokenTransferShortfall(uint256 expected, uint256 received);
    /// @notice The signature does not recover to an address.
    error InvalidSignature();
    /// @notice The attestation expired at `expiry`: it no longer counts anywhere, so it can no longer be disputed.
    error AttestationExpired(uint32 expiry);
    /// @notice The attestation was already disputed, or the fault already slashed (`id`: faultDisputeId).
    error AlreadyDisputed(bytes32 id);
    /// @notice `attestor` holds no stake to slash.
    error NothingAtStake(address attestor);
    /// @notice No open dispute has this id.
    error DisputeNotOpen(bytes32 id);
    /// @notice The answer window closed at `answerBy`.
    error AnswerWindowClosed(bytes32 id, uint32 answerBy);
    /// @notice The answer window is still open until `answerBy`.
    error AnswerWindowOpen(bytes32 id, uint32 answerBy);
    /// @notice The attestation given does not hash to the dispute's id.
    error AttestationMismatch(bytes32 id, bytes32 digest);
    /// @notice The commit is signed by `signer`, not the attestation's provider `provider`.
    error NotProviderCommit(address signer, address provider);
    /// @notice The commit is not the attestation's: `part` names what differs ("units", "root" or "gpus").
    error CommitMismatch(string part);
    /// @notice `sortedOrder` is not a permutation of the devices' indices in ascending byte order.
    error DeviceOrderInvalid(uint256 position);
    /// @notice Only a liveness fault (kind 1) is contradicted by a receipt; this fault is of `kind`.
    error NotALivenessFault(uint8 kind);
    /// @notice The fault (lease `faultLeaseId`) and the receipt (lease `receiptLeaseId`) are of different leases.
    error LeaseMismatch(uint256 faultLeaseId, uint256 receiptLeaseId);
    /// @notice The fault's signature is not one the contract accepts (65-byte r, s, v with low s) or recovers nothing.
    error InvalidFaultSignature();
    /// @notice The receipt's signature is not one the contract accepts (65-byte r, s, v with low s) or recovers nothing.
    error InvalidReceiptSignature();
    /// @notice The fault and the receipt are signed by different keys: only an attestor's own receipt contradicts it.
    error SignersDiffer(address faultSigner, address receiptSigner);
    /// @notice The receipt was received at `receivedAtMs`, outside [fromMs, toMs]: it does not contradict the fault.
    error ReceiptOutsideWindow(uint64 receivedAtMs, uint256 fromMs, uint256 toMs);
    /// @notice disputeCapacityFault takes capacity faults (kind 2) only; a liveness fault goes to disputeFault.
    error NotACapacityFault(uint8 kind);
    /// @notice The attestation is not of the lease's machine (its provider and machineId), or attests fewer units than
    ///         the lease holds: it says nothing about the capacity the fault claims failed.
    error AttestationNotOfLease(uint256 leaseId, address provider, uint32 machineId, uint16 units);
    /// @notice A capacity fault is contradicted by an attestation issued in [observedAt + 1, observedAt + faultWindow] s.
    error AttestationOutsideWindow(uint32 issuedAt, uint256 from, uint256 to);
    /// @notice A parameter is outside its accepted range [min, max].
    error ParamOutOfRange(string name, uint256 value, uint256 min, uint256 max);
    /// @notice The sink may not be the zero address.
    error ZeroSink();
    /// @notice Only the registry's governance (DEFAULT_ADMIN_ROLE) may do this.
    error NotGovernance(address account);
    /// @notice The zero address cannot receive a claim.
    error ZeroRecipient();
    /// @notice The same attestation or fault (`id`) was already disputed in `staking`, an AttestorStaking this one
    ///         replaced (its predecessors): a lie is slashed once.
    error DisputedInLineage(bytes32 id, address staking);
    /// @notice Only the registry's current AttestorStaking (`current`; zero when none is attached) takes new disputes;
    ///         this one is retired or not attached yet (its open disputes still answer and resolve, its stakes still
    ///         unbond, its credits are still claimed).
    error NotCurrentStaking(address current);
    /// @notice The predecessor given at deployment is not an AttestorStaking of the same registry and market: `part`
    ///         says what differs ("code": nothing deployed there; "registry"; "market").
    error PredecessorMismatch(address predecessor, string part);

    /// @notice Stakes `amount` of the token (approved beforehand).
    function stake(uint96 amount) external;

    /// @notice Stakes `amount`, paid by the caller, for `attestor` (a deployer or an operator funding its attestors);
    ///         only the attestor can unstake and withdraw it.
    function stakeFor(address attestor, uint96 amount) external;

    /// @notice Stakes with an EIP-2612 permit (a permit already used by a front-runner is tolerated).
    function stakeWithPermit(uint96 amount, uint256 deadline, uint8 v, bytes32 r, bytes32 s) external;

    /// @notice Moves `amount` of active stake to unbonding; it stops counting at once.
    function requestUnstake(uint96 amount) external;

    /// @notice Withdraws unbonding stake after the delay, when no dispute against the caller is open.
    function withdraw() external;

    /// @notice Disputes an attestation by bonding disputeFee: its attestor must answer with the provider's signed commit.
    ///         Unanswered, the whole slash goes to the sink and the fee back to the disputer: no share is paid to a
    ///         disputer, which the attestor itself can be (a liar disputing its own attestation first loses as much as
    ///         when anyone else disputes it; issue #34, finding 6).
    /// @return id The attestation's EIP-712 digest.
    function disputeAttestation(Attestation calldata attestation, bytes calldata signature) external returns (bytes32 id);

    /// @notice Answers a dispute with the provider's EIP-712 AttestCommitV2 for the attestation's challenge id, whose
    ///         roots hash to the attestation's root, one per attested unit, and whose devices hash to its GPUs.
    function answerDispute(Attestation calldata attestation, Commit calldata commit, bytes calldata commitSignature) external;

    /// @notice Slashes the attestor of an unanswered dispute once its window closed (anyone may call).
    function resolveDispute(bytes32 id) external;

    /// @notice Slashes at once an attestor whose liveness fault (kind 1) its own receipt contradicts: it signed `fault`
    ///         and a ProbeReceipt of the same lease received in [(observedAt + 1) * 1000, (observedAt + faultWindow) *
    ///         1000] ms (faultWindowFor(observedAt)), i.e. it counted an answer within the window of silence its fault
    ///         claims. slashAmount (capped by
    ///         its active and unbonding stake) goes to the lease's provider (disputerShareBps; whoever calls) and the
    ///         sink; each fault and attestor once.
    /// @param fault The fault the attestor signed.
    /// @param faultSignature Its signature of `fault`.
    /// @param receipt The receipt the attestor signed.
    /// @param receiptSignature Its signature of `receipt`.
    /// @return id faultDisputeId(fault, attestor).
    function disputeFault(Fault calldata fault, bytes calldata faultSignature, ProbeReceipt calldata receipt, bytes calldata receiptSignature)
        external
        returns (bytes32 id);

    /// @notice Slashes at once an attestor whose capacity fault (kind 2: the leased machine failed its challenge at
    ///         observedAt, with no pass since) its own Attestation contradicts: it signed `fault` and, in the market's
    ///         domain, an attestation that the lease's machine (same provider and machineId, at least the lease's units)
    ///         passed a challenge, issued in [observedAt + 1, observedAt + faultWindowFor(observedAt)] s. The provider
    ///         holds every attestation it passed. Paid as disputeFault (share to the lease's provider), once per fault
    ///         and attestor across both dispute paths.
    /// @param fault The fault the attestor signed.
    /// @param faultSignature Its signature of `fault`.
    /// @param attestation The attestation the attestor signed.
    /// @param attestationSignature Its signature of `attestation`.
    /// @return id faultDisputeId(fault, attestor).
    function disputeCapacityFault(
        Fault calldata fault,
        bytes calldata faultSignature,
        Attestation calldata attestation,
        bytes calldata attestationSignature
    ) external returns (bytes32 id);

    /// @notice Pays the caller what it is owed (fees, slash shares) to `to`.
    function claim(address to) external;

    /// @notice Sets the parameters (the registry's DEFAULT_ADMIN_ROLE).
    function setParams(Params calldata params) external;

    /// @notice Whether `account` holds at least minStake of active stake: its signatures count.
    function isStaked(address account) external view returns (bool);

    /// @notice One step of a lineage walk: whether this contract recorded a dispute `id` (an attestation's, open,
    ///         answered or slashed, or a slashed fault's faultDisputeId) and the staking it replaced (zero: none).
    function disputeRecord(bytes32 id) external view returns (bool recorded, address predecessor);

    /// @notice The staking of this one's chain (itself, then its predecessors) that recorded a dispute `id`, or zero.
    ///         Read it on the registry's current staking to know whether a lie can still be disputed anywhere.
    function disputedIn(bytes32 id) external view returns (address staking);

    /// @notice The AttestorStaking this one replaced (zero for the first of its registry and market).
    function predecessor() external view returns (address);

    /// @notice The ProviderRegistry this staking serves.
    function registry() external view returns (address);

    /// @notice The LeaseMarket whose EIP-712 domain every signature disputed here is in.
    function market() external view returns (address);

    /// @notice The parameters.
    function params() external view returns (Params memory);

    /// @notice The fault window a receipt must fall in for a fault observed at `observedAt` (contract's NatSpec).
    function faultWindowFor(uint32 observedAt) external view returns (uint32);
}
