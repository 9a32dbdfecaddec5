// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.34;

/// @title IAttestorStaking
/// @notice Attestors' stakes in the settlement token and the dispute game that slashes an attestor who signed an
///         attestation it cannot back with the provider's signed commit (docs/attestation.md, "Trust in attestors").
interface IAttestorStaking {
    /// @notice Governance parameters.
    /// @param minStake Active stake an attestor needs for its signatures to count (faults and attestations).
    /// @param slashAmount Taken from an attestor's stake (active, then unbonding) per lost dispute.
    /// @param disputeFee Bonded by a disputer: back to it when the attestor is slashed, to the attestor when it answers.
    /// @param answerWindow Seconds an attestor has to answer a dispute.
    /// @param unbondingDelay Seconds between an unstake request and its withdrawal (at least answerWindow).
    /// @param disputerShareBps Share of a slash paid to the disputer (at most MAX_DISPUTER_SHARE_BPS); the rest to sink.
    /// @param sink Receives the rest of a slash (a treasury, or a burn address).
    struct Params {
        uint96 minStake;
        uint96 slashAmount;
        uint96 disputeFee;
        uint32 answerWindow;
        uint32 unbondingDelay;
        uint16 disputerShareBps;
        address sink;
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
    /// @notice The attestor did not answer in time and lost `amount` of its stake.
    event AttestorSlashed(bytes32 indexed id, address indexed attestor, uint96 amount, address disputer, uint96 toDisputer, address sink, uint96 toSink);
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
    /// @notice The attestation was already disputed.
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
    /// @notice A parameter is outside its accepted range [min, max].
    error ParamOutOfRange(string name, uint256 value, uint256 min, uint256 max);
    /// @notice The sink may not be the zero address.
    error ZeroSink();
    /// @notice Only the registry's governance (DEFAULT_ADMIN_ROLE) may do this.
    error NotGovernance(address account);
    /// @notice The zero address cannot receive a claim.
    error ZeroRecipient();

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
    /// @return id The attestation's EIP-712 digest.
    function disputeAttestation(Attestation calldata attestation, bytes calldata signature) external returns (bytes32 id);

    /// @notice Answers a dispute with the provider's EIP-712 AttestCommitV2 for the attestation's challenge id, whose
    ///         roots hash to the attestation's root, one per attested unit, and whose devices hash to its GPUs.
    function answerDispute(Attestation calldata attestation, Commit calldata commit, bytes calldata commitSignature) external;

    /// @notice Slashes the attestor of an unanswered dispute once its window closed (anyone may call).
    function resolveDispute(bytes32 id) external;

    /// @notice Pays the caller what it is owed (fees, slash shares) to `to`.
    function claim(address to) external;

    /// @notice Sets the parameters (the registry's DEFAULT_ADMIN_ROLE).
    function setParams(Params calldata params) external;

    /// @notice Whether `account` holds at least minStake of active stake: its signatures count.
    function isStaked(address account) external view returns (bool);
}
