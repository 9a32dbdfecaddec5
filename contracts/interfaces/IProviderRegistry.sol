// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.34;

/// @title IProviderRegistry
/// @notice Providers, their stake and collateral, their machines (the chain's record of capacity), offer
///         nonces, the attestor set and reputation. The LeaseMarket (MARKET_ROLE) reserves and releases
///         units and collateral with one call per lease transition.
interface IProviderRegistry {
    /// @notice How a lease ended, for the reputation counters.
    enum Outcome {
        /// @dev No counter moves except unit-seconds (renter closed an unstarted lease, preemption, shrink).
        Neutral,
        /// @dev The provider served the lease to its end: leasesCompleted + 1 if it delivered paid unit-seconds.
        Completed,
        /// @dev The provider failed it (quorum fault, termination without cause, missed start): faults + 1.
        Faulted
    }

    /// @notice A provider as the off-chain code reads it.
    struct ProviderView {
        bool registered;
        /// @dev free + locked + unbonding: every token the registry holds for the provider.
        uint96 stake;
        /// @dev Collateral that new leases can lock.
        uint96 free;
        /// @dev Collateral locked by open and active leases; it cannot leave.
        uint96 locked;
        /// @dev Stake waiting for unlockAt; never usable as collateral.
        uint96 unbonding;
        uint32 unlockAt;
        uint32 machineCount;
        /// @dev Offers with a lower nonce are revoked.
        uint64 nonceFloor;
        /// @dev Leases that delivered paid service and ended without a fault.
        uint64 leasesCompleted;
        uint64 faults;
        /// @dev Unit-seconds delivered and paid for.
        uint128 unitSecondsDelivered;
        string peerId;
        string metadataURI;
    }

    /// @notice A machine as the off-chain code reads it. Idle units = units - onDemandUnits - interruptibleUnits.
    /// @dev A return value, never stored: field order follows the declaration, not packing.
    // solhint-disable-next-line gas-struct-packing
    struct MachineView {
        address owner;
        bytes32 model;
        uint16 units;
        uint32 vramMiB;
        uint8 interconnect;
        string region;
        bytes32 cluster;
        uint16 onDemandUnits;
        uint16 interruptibleUnits;
    }

    // ---------------------------------------------------------------- events

    /// @notice `provider` registered with a libp2p peer id and a metadata URI.
    event ProviderRegistered(address indexed provider, string peerId, string metadataURI);
    /// @notice `provider` changed its peer id or metadata URI.
    event ProfileUpdated(address indexed provider, string peerId, string metadataURI);
    /// @notice `provider` left; its whole stake started unbonding.
    event ProviderDeregistered(address indexed provider);
    /// @notice The provider's stake changed (stake, unstake request, withdrawal, deregistration, slash).
    /// @param stake free + locked + unbonding after the change.
    event StakeChanged(address indexed provider, uint96 stake, uint96 free, uint96 unbonding, uint32 unlockAt);
    /// @notice `amount` of the provider's locked collateral was paid to `to` (a renter's penalty or SLA credit).
    event CollateralSlashed(address indexed provider, address indexed to, uint96 amount);
    /// @notice A machine was declared.
    event MachineAdded(
        uint32 indexed machineId,
        address indexed provider,
        bytes32 indexed model,
        uint16 units,
        uint32 vramMiB,
        uint8 interconnect,
        string region,
        bytes32 cluster
    );
    /// @notice A machine's declaration changed (only possible while no unit is leased).
    event MachineUpdated(
        uint32 indexed machineId,
        address indexed provider,
        bytes32 indexed model,
        uint16 units,
        uint32 vramMiB,
        uint8 interconnect,
        string region,
        bytes32 cluster
    );
    /// @notice A machine was removed (only possible while no unit is leased).
    event MachineRemoved(uint32 indexed machineId, address indexed provider);
    /// @notice A machine's units changed mode: on-demand (AI work), interruptible, or idle (the provider's own workload).
    event CapacityChanged(uint32 indexed machineId, uint16 onDemandUnits, uint16 interruptibleUnits, uint16 idleUnits);
    /// @notice The provider revoked one offer nonce.
    event OfferNonceRevoked(address indexed provider, uint64 nonce);
    /// @notice The provider revoked every offer nonce below `floor`.
    event OfferNonceFloorRaised(address indexed provider, uint64 floor);
    /// @notice Governance changed the unbonding delay.
    event UnbondingDelayChanged(uint32 delay);
    /// @notice Governance changed the number of distinct attestor signatures a fault needs.
    event FaultQuorumChanged(uint8 quorum);
    /// @notice Governance changed the fault quorum's share of the attestor set, in basis points.
    event FaultQuorumBpsChanged(uint16 bps);
    /// @notice Governance set the AttestorStaking contract whose minimum stake attestors need (zero: none needed).
    event AttestorStakingChanged(address staking);

    // ---------------------------------------------------------------- errors

    /// @notice MARKET_ROLE goes once, to a LeaseMarket of this registry, and stays there: `account` is not a contract
    ///         whose `registry()` is this registry (an EOA, an EIP-7702 delegated EOA, or another contract).
    error MarketRoleNotAMarket(address account);
    /// @notice MARKET_ROLE is held by `holder` for good: it is never granted again nor revoked.
    error MarketRoleFixed(address holder);
    /// @notice `provider` is already registered.
    error AlreadyRegistered(address provider);
    /// @notice `provider` is not registered.
    error NotRegistered(address provider);
    /// @notice A peer id must be 1 to `maxLength` bytes.
    error InvalidPeerId(uint256 length, uint256 maxLength);
    /// @notice A metadata URI must be at most `maxLength` bytes.
    error InvalidMetadataURI(uint256 length, uint256 maxLength);
    /// @notice Deregistering needs every machine removed first.
    error ProviderHasMachines(address provider, uint32 machineCount);
    /// @notice Leases still lock `locked` of the provider's collateral.
    error CollateralStillLocked(address provider, uint96 locked);
    /// @notice An amount of zero where tokens must move.
    error ZeroAmount();
    /// @notice The provider's free stake `free` is below `needed`.
    error InsufficientFreeStake(address provider, uint96 free, uint96 needed);
    /// @notice Nothing is unbonding for `provider`.
    error NothingToWithdraw(address provider);
    /// @notice The unbonding stake unlocks at `unlockAt`.
    error StillUnbonding(address provider, uint32 unlockAt);
    /// @notice `account` does not own machine `machineId` (or the machine does not exist).
    error NotMachineOwner(uint32 machineId, address account);
    /// @notice A machine's model must be a nonzero hash of its canonical name.
    error ZeroModel();
    /// @notice A machine has 1 to 65535 units.
    error InvalidUnitCount(uint16 units);
    /// @notice Interconnect codes: 0 none/PCIe, 1 NVLink, 2 fabric.
    error InvalidInterconnect(uint8 interconnect);
    /// @notice A region must be 1 to `maxLength` bytes.
    error InvalidRegion(uint256 length, uint256 maxLength);
    /// @notice `usedUnits` of the machine are leased; it cannot change or leave.
    error MachineLeased(uint32 machineId, uint16 usedUnits);
    /// @notice The offer names model `offerModel` but the machine is declared as `machineModel`.
    error ModelMismatch(uint32 machineId, bytes32 machineModel, bytes32 offerModel);
    /// @notice Only `freeUnits` of the machine are free; `requested` were asked for.
    error InsufficientUnits(uint32 machineId, uint16 freeUnits, uint16 requested);
    /// @notice The offer nonce was revoked, is below the provider's floor, or a renter-bound offer already used it.
    error InvalidOfferNonce(address provider, uint64 nonce);
    /// @notice A new nonce floor must be above the current one.
    error NonceFloorNotRaised(uint64 current, uint64 requested);
    /// @notice The fault quorum must be at least 1 and at most `max` (the signatures a fault may carry).
    error InvalidFaultQuorum(uint8 quorum, uint8 max);
    /// @notice The fault quorum's share of the attestor set must lie in [`min`, `max`] basis points (or be 0: the floor only).
    error InvalidFaultQuorumBps(uint16 bps, uint16 min, uint16 max);
    /// @notice The registry received `received` of a `expected` transfer (fee-on-transfer tokens are not supported).
    error TokenTransferShortfall(uint256 expected, uint256 received);
    /// @notice The unbonding delay may not exceed `max` seconds.
    error UnbondingDelayTooLong(uint32 delay, uint32 max);
    /// @notice An AttestorStaking must name the last one attached as its predecessor (`expected`; zero for the first):
    ///         `staking` names `named`.
    error StakingNotSuccessor(address staking, address named, address expected);

    // ---------------------------------------------------------------- providers

    /// @notice Registers the caller as a provider.
    /// @param peerId The provider node's libp2p peer id (1 to 128 bytes).
    /// @param metadataURI Where the provider describes itself (at most 256 bytes, may be empty).
    function register(string calldata peerId, string calldata metadataURI) external;

    /// @notice Changes the caller's peer id and metadata URI.
    /// @param peerId The new libp2p peer id (1 to 128 bytes).
    /// @param metadataURI The new metadata URI (at most 256 bytes).
    function updateProfile(string calldata peerId, string calldata metadataURI) external;

    /// @notice Leaves the registry. Needs every machine removed and nothing locked; the whole free stake
    ///         starts unbonding and can be withdrawn after the unbonding delay.
    function deregister() external;

    /// @notice Pulls `amount` tokens from the caller into its free stake (approve the registry first).
    /// @param amount Base units, nonzero.
    function stake(uint96 amount) external;

    /// @notice Moves `amount` of free stake into unbonding; all unbonding stake unlocks at now + unbonding delay.
    /// @param amount Base units, nonzero, at most the free stake.
    function requestUnstake(uint96 amount) external;

    /// @notice Pays the caller its unbonding stake once it has unlocked.
    function withdraw() external;

    // ---------------------------------------------------------------- machines

    /// @notice Declares a machine of the caller.
    /// @param model keccak256 of the canonical GPU model name (common/gpu.ts modelHash).
    /// @param units GPUs or declared GPU slices, at least 1.
    /// @param vramMiB Memory per unit in MiB.
    /// @param interconnect 0 none/PCIe, 1 NVLink, 2 fabric.
    /// @param region Where the machine is (1 to 32 bytes).
    /// @param cluster Machines that share a declared fast interconnect share a cluster id; zero when standalone.
    /// @return machineId The new machine's id (global, from 1).
    function addMachine(
        bytes32 model,
        uint16 units,
        uint32 vramMiB,
        uint8 interconnect,
        string calldata region,
        bytes32 cluster
    ) external returns (uint32 machineId);

    /// @notice Changes a machine's declaration; only while none of its units is leased.
    /// @param machineId The caller's machine.
    /// @param model keccak256 of the canonical GPU model name.
    /// @param units GPUs or declared GPU slices, at least 1.
    /// @param vramMiB Memory per unit in MiB.
    /// @param interconnect 0 none/PCIe, 1 NVLink, 2 fabric.
    /// @param region Where the machine is (1 to 32 bytes).
    /// @param cluster Cluster id, zero when standalone.
    function updateMachine(
        uint32 machineId,
        bytes32 model,
        uint16 units,
        uint32 vramMiB,
        uint8 interconnect,
        string calldata region,
        bytes32 cluster
    ) external;

    /// @notice Removes a machine; only while none of its units is leased.
    /// @param machineId The caller's machine.
    function removeMachine(uint32 machineId) external;

    // ---------------------------------------------------------------- offer nonces

    /// @notice Revokes one offer nonce of the caller: offers signed with it can no longer open or extend leases.
    /// @param nonce The nonce to revoke.
    function revokeNonce(uint64 nonce) external;

    /// @notice Revokes every offer nonce of the caller below `floor`.
    /// @param floor The new lowest valid nonce; must be above the current floor.
    function revokeNoncesBelow(uint64 floor) external;

    // ---------------------------------------------------------------- governance

    /// @notice Sets the unbonding delay (DEFAULT_ADMIN_ROLE).
    /// @param delay Seconds, at most MAX_UNBONDING_DELAY.
    function setUnbondingDelay(uint32 delay) external;

    /// @notice Sets how many distinct attestor signatures a fault needs (DEFAULT_ADMIN_ROLE).
    /// @param quorum From 1 to MAX_FAULT_QUORUM (32, the most signatures a fault carries).
    function setFaultQuorum(uint8 quorum) external;

    /// @notice Sets the fault quorum as a share of the attestor set (DEFAULT_ADMIN_ROLE): faultQuorum() is then
    ///         max(floor, ceil(bps x attestorCount / 10,000)), capped at MAX_FAULT_QUORUM.
    /// @param bps 0 (the floor set by setFaultQuorum alone), or from MIN_FAULT_QUORUM_BPS (a third) to 10,000.
    function setFaultQuorumBps(uint16 bps) external;

    /// @notice Sets the AttestorStaking contract (DEFAULT_ADMIN_ROLE): from then on an ATTESTOR_ROLE holder counts as
    ///         an attestor only while it holds that contract's minimum stake. Zero: the role alone counts (and no
    ///         staking takes a new dispute). A staking must name the last one attached (zero for the first) as its
    ///         predecessor (`StakingNotSuccessor`): the current staking checks its predecessors' records, so each lie is
    ///         slashed once. Attach a replacement once attestors have staked in it: from then on only its stakes count.
    /// @param staking The AttestorStaking, or the zero address.
    function setAttestorStaking(address staking) external;

    // ---------------------------------------------------------------- market hooks (MARKET_ROLE)

    /// @notice Reserves units of a machine and locks collateral for a new lease.
    /// @dev Checks the machine's owner and model, free units, free stake and the offer nonce.
    /// @param provider The machine's owner, who signed the offer.
    /// @param machineId The machine.
    /// @param model The model the offer names; must match the machine.
    /// @param units Units to reserve.
    /// @param interruptible Counts the units as interruptible (else on-demand).
    /// @param collateral Free stake to lock.
    /// @param offerNonce The offer's nonce; must be usable.
    /// @param consumeNonce Marks the nonce used (renter-bound offers are single-use).
    function reserve(
        address provider,
        uint32 machineId,
        bytes32 model,
        uint16 units,
        bool interruptible,
        uint96 collateral,
        uint64 offerNonce,
        bool consumeNonce
    ) external;

    /// @notice Releases a lease's units and collateral; sends `slashAmount` of the collateral to the market, which
    ///         pays it to `slashTo` (so a receiver that refuses tokens cannot block the release).
    /// @param provider The lease's provider.
    /// @param machineId The lease's machine.
    /// @param units Units to free.
    /// @param interruptible Whether the units were interruptible.
    /// @param collateral Collateral to unlock.
    /// @param slashAmount Part of `collateral` paid to `slashTo` (penalty or SLA credit); the rest becomes free stake.
    /// @param slashTo The renter.
    /// @param unitSeconds Paid unit-seconds delivered, added to reputation (zero: the lease is not counted).
    /// @param outcome Which reputation counter moves.
    function release(
        address provider,
        uint32 machineId,
        uint16 units,
        bool interruptible,
        uint96 collateral,
        uint96 slashAmount,
        address slashTo,
        uint64 unitSeconds,
        Outcome outcome
    ) external;

    /// @notice Locks more collateral for an extended lease, checking the consenting offer's nonce.
    /// @param provider The lease's provider.
    /// @param amount Extra collateral to lock.
    /// @param offerNonce The consenting offer's nonce.
    /// @param consumeNonce Marks the nonce used (renter-bound offers are single-use).
    function lockMore(address provider, uint96 amount, uint64 offerNonce, bool consumeNonce) external;

    /// @notice Frees some units and collateral of a shrunk lease.
    /// @param provider The lease's provider.
    /// @param machineId The lease's machine.
    /// @param units Units to free.
    /// @param interruptible Whether the units were interruptible.
    /// @param amount Collateral to unlock.
    /// @param unitSeconds Unit-seconds delivered before the shrink, added to reputation.
    function unlockPart(
        address provider,
        uint32 machineId,
        uint16 units,
        bool interruptible,
        uint96 amount,
        uint64 unitSeconds
    ) external;

    // ---------------------------------------------------------------- views

    /// @notice The settlement token.
    /// @return The token's address.
    function token() external view returns (address);

    /// @notice A provider's registration, stake, collateral and reputation.
    /// @param provider The provider's address.
    /// @return The provider's record.
    function getProvider(address provider) external view returns (ProviderView memory);

    /// @notice A machine's declaration and current use.
    /// @param machineId The machine.
    /// @return The machine's record (owner zero if it does not exist).
    function getMachine(uint32 machineId) external view returns (MachineView memory);

    /// @notice A machine's unit counts, for the market's preemption path.
    /// @param machineId The machine.
    /// @return units Declared units.
    /// @return onDemandUnits Units held by on-demand leases.
    /// @return interruptibleUnits Units held by interruptible leases.
    function capacityOf(uint32 machineId)
        external
        view
        returns (uint16 units, uint16 onDemandUnits, uint16 interruptibleUnits);

    /// @notice Stake that new leases can lock as collateral.
    /// @param provider The provider.
    /// @return The free stake in base units.
    function freeStake(address provider) external view returns (uint96);

    /// @notice Whether an offer nonce can still open leases.
    /// @param provider The offer's provider.
    /// @param nonce The offer's nonce.
    /// @return True unless revoked, below the floor or used by a renter-bound offer.
    function isNonceUsable(address provider, uint64 nonce) external view returns (bool);

    /// @notice Whether `account` counts as an attestor: it holds ATTESTOR_ROLE and, once governance set an
    ///         AttestorStaking, at least its minimum stake. The market's fault check and the offer book read this.
    /// @param account The address to check.
    /// @return True for attestors.
    function isAttestor(address account) external view returns (bool);

    /// @notice The AttestorStaking contract attestors must be staked in (zero when none is set).
    /// @return The contract.
    function attestorStaking() external view returns (address);

    /// @notice Distinct attestor signatures a fault needs (and attestations an offer needs, in the offer book):
    ///         max(floor, ceil(faultQuorumBps x attestorCount / 10,000)), at most MAX_FAULT_QUORUM.
    /// @return The quorum.
    function faultQuorum() external view returns (uint8);

    /// @notice The quorum's floor (setFaultQuorum) and its share of the attestor set in basis points (setFaultQuorumBps).
    /// @return floor The least quorum.
    /// @return bps The share; 0 when the floor alone applies.
    function faultQuorumParams() external view returns (uint8 floor, uint16 bps);

    /// @notice Accounts holding ATTESTOR_ROLE (whether or not they are staked): the set the quorum is a share of.
    /// @return The count.
    function attestorCount() external view returns (uint256);

    /// @notice Seconds between an unstake request and its withdrawal.
    /// @return The delay.
    function unbondingDelay() external view returns (uint32);

    /// @notice The highest machine id assigned so far.
    /// @return The last machine id (0 before the first machine).
    function lastMachineId() external view returns (uint32);
}
