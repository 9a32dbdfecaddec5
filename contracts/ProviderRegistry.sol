// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.34;

import {AccessControlEnumerable} from "@openzeppelin/contracts/access/extensions/AccessControlEnumerable.sol";
import {Math} from "@openzeppelin/contracts/utils/math/Math.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {ReentrancyGuardTransient} from "@openzeppelin/contracts/utils/ReentrancyGuardTransient.sol";
import {IAttestorStaking} from "./interfaces/IAttestorStaking.sol";
import {IProviderRegistry} from "./interfaces/IProviderRegistry.sol";

/// @dev The one view of the LeaseMarket the registry reads (before granting it MARKET_ROLE).
interface ILeaseMarketRegistry {
    function registry() external view returns (address);
}

/// @title ProviderRegistry
/// @notice Holds providers' stakes and records their machines, the attestor set and reputation.
///         The chain is the arbiter of capacity: the LeaseMarket reserves units here, and a unit
///         is never reserved twice. Governance is DEFAULT_ADMIN_ROLE; the market holds MARKET_ROLE.
/// @dev Storage is laid out so a lease transition touches few slots: the hot provider slot (`Funds`)
///      packs free stake, locked collateral and the nonce floor; a machine's first slot packs its
///      owner, unit count and both used-unit counters; registration, the machine count and the reputation
///      counters share one slot (`Standing`), written at registration, so a lease's end never writes a zero
///      slot. The invariant kept by every function:
///      token.balanceOf(this) == sum over providers of (free + locked + unbonding).
contract ProviderRegistry is IProviderRegistry, AccessControlEnumerable, ReentrancyGuardTransient {
    using SafeERC20 for IERC20;
    using SafeCast for uint256;

    /// @notice The LeaseMarket's role: reserve, release, lockMore, unlockPart.
    bytes32 public constant MARKET_ROLE = keccak256("MARKET_ROLE");
    /// @notice Attestors sign faults; a quorum of them ends a lease.
    bytes32 public constant ATTESTOR_ROLE = keccak256("ATTESTOR_ROLE");
    /// @notice The longest unbonding delay governance may set.
    uint32 public constant MAX_UNBONDING_DELAY = 90 days;
    /// @notice Longest libp2p peer id accepted, in bytes.
    uint256 public constant MAX_PEER_ID_LENGTH = 128;
    /// @notice Longest metadata URI accepted, in bytes.
    uint256 public constant MAX_METADATA_URI_LENGTH = 256;
    /// @notice Longest region accepted, in bytes.
    uint256 public constant MAX_REGION_LENGTH = 32;
    /// @notice Highest interconnect code (2 = fabric).
    uint8 public constant MAX_INTERCONNECT = 2;
    /// @notice Highest fault quorum: a fault carries at most 32 signatures (LeaseMarket.MAX_FAULT_SIGNATURES).
    uint8 public constant MAX_FAULT_QUORUM = 32;
    /// @notice The least share of the attestor set governance may set as the quorum (a third): below it a
    ///         handful of attestors in a large set could fault a live provider.
    uint16 public constant MIN_FAULT_QUORUM_BPS = 3_334;
    uint16 private constant BPS = 10_000;

    /// @dev The slot a lease transition reads and writes: 96 + 96 + 64 bits.
    struct Funds {
        uint96 free;
        uint96 locked;
        uint64 nonceFloor;
    }

    /// @dev Cold provider state (unstaking): 96 + 32 bits.
    struct Account {
        uint96 unbonding;
        uint32 unlockAt;
    }

    /// @dev One slot, 64 + 64 + 88 + 32 + 8 bits, written at registration: a lease's end updates the reputation
    ///      counters in a slot that is already nonzero (2,900 gas, not 20,000 for a new provider's first lease).
    ///      88 bits of unit-seconds: 2^88 / (65,535 units x 2^32 s) is over 10^12 of the largest possible leases.
    struct Standing {
        uint64 leasesCompleted;
        uint64 faults;
        uint88 unitSecondsDelivered;
        uint32 machineCount;
        bool registered;
    }

    struct Profile {
        string peerId;
        string metadataURI;
    }

    /// @dev Slot 0 packs owner (160) + units (16) + both used counters (32) + vramMiB (32) + interconnect (8).
    struct Machine {
        address owner;
        uint16 units;
        uint16 onDemandUsed;
        uint16 interruptibleUsed;
        uint32 vramMiB;
        uint8 interconnect;
        bytes32 model;
        bytes32 cluster;
        string region;
    }

    IERC20 private immutable _TOKEN;

    mapping(address provider => Funds) private _funds;
    mapping(address provider => Account) private _accounts;
    mapping(address provider => Standing) private _standing;
    mapping(address provider => Profile) private _profiles;
    mapping(uint32 machineId => Machine) private _machines;
    mapping(address provider => mapping(uint256 word => uint256 bits)) private _nonceBitmap;

    uint32 private _lastMachineId;
    uint32 private _unbondingDelay;
    uint8 private _faultQuorum;
    uint16 private _faultQuorumBps;
    IAttestorStaking private _attestorStaking;
    /// @dev The last non-zero staking attached: the next one must name it as its predecessor (one lineage, no rollback).
    IAttestorStaking private _lastAttestorStaking;

    /// @notice Deploys the registry for one settlement token, with governance and its first parameters.
    /// @param token_ The settlement token (an ERC-20; EIP-2612 for the permit path of the market).
    /// @param governance Receives DEFAULT_ADMIN_ROLE: grants MARKET_ROLE and ATTESTOR_ROLE, sets parameters.
    /// @param unbondingDelay_ Seconds between an unstake request and its withdrawal.
    /// @param faultQuorum_ Distinct attestor signatures a fault needs (at least 1): the floor under the share of the
    ///        attestor set that setFaultQuorumBps may add.
    constructor(address token_, address governance, uint32 unbondingDelay_, uint8 faultQuorum_) {
        _TOKEN = IERC20(token_);
        _grantRole(DEFAULT_ADMIN_ROLE, governance);
        _setUnbondingDelay(unbondingDelay_);
        _setFaultQuorum(faultQuorum_);
    }

    // ---------------------------------------------------------------- providers

    /// @inheritdoc IProviderRegistry
    function register(string calldata peerId, string calldata metadataURI) external {
        Standing storage standing = _standing[msg.sender];
        if (standing.registered) revert AlreadyRegistered(msg.sender);
        _checkProfile(peerId, metadataURI);
        standing.registered = true;
        _profiles[msg.sender] = Profile(peerId, metadataURI);
        emit ProviderRegistered(msg.sender, peerId, metadataURI);
    }

    /// @inheritdoc IProviderRegistry
    function updateProfile(string calldata peerId, string calldata metadataURI) external {
        _requireRegistered(msg.sender);
        _checkProfile(peerId, metadataURI);
        _profiles[msg.sender] = Profile(peerId, metadataURI);
        emit ProfileUpdated(msg.sender, peerId, metadataURI);
    }

    /// @inheritdoc IProviderRegistry
    function deregister() external {
        Standing storage standing = _standing[msg.sender];
        if (!standing.registered) revert NotRegistered(msg.sender);
        if (standing.machineCount != 0) revert ProviderHasMachines(msg.sender, standing.machineCount);
        Account memory account = _accounts[msg.sender];
        Funds memory funds = _funds[msg.sender];
        // Unreachable while machineCount is zero (leases hold machines), kept as a guard for the money.
        if (funds.locked != 0) revert CollateralStillLocked(msg.sender, funds.locked);
        standing.registered = false;
        account.unbonding += funds.free;
        account.unlockAt = uint32(block.timestamp) + _unbondingDelay;
        funds.free = 0;
        _accounts[msg.sender] = account;
        _funds[msg.sender] = funds;
        delete _profiles[msg.sender];
        emit ProviderDeregistered(msg.sender);
        emit StakeChanged(msg.sender, account.unbonding, 0, account.unbonding, account.unlockAt);
    }

    /// @inheritdoc IProviderRegistry
    function stake(uint96 amount) external nonReentrant {
        _requireRegistered(msg.sender);
        if (amount == 0) revert ZeroAmount();
        Funds storage funds = _funds[msg.sender];
        // The whole stake must fit 96 bits, so moving collateral between free, locked and unbonding can
        // never overflow (a release that reverted would trap a renter's refund).
        (uint256(funds.free) + funds.locked + _accounts[msg.sender].unbonding + amount).toUint96();
        funds.free += amount;
        _emitStake(msg.sender);
        // Measured, so a fee-on-transfer token can never leave the stakes short of what they record.
        uint256 before = _TOKEN.balanceOf(address(this));
        _TOKEN.safeTransferFrom(msg.sender, address(this), amount);
        uint256 received = _TOKEN.balanceOf(address(this)) - before;
        if (received != amount) revert TokenTransferShortfall(amount, received);
    }

    /// @inheritdoc IProviderRegistry
    function requestUnstake(uint96 amount) external {
        if (amount == 0) revert ZeroAmount();
        Funds storage funds = _funds[msg.sender];
        uint96 free = funds.free;
        if (amount > free) revert InsufficientFreeStake(msg.sender, free, amount);
        // Cannot underflow: checked against `free` just above.
        unchecked {
            funds.free = free - amount;
        }
        Account storage account = _accounts[msg.sender];
        account.unbonding += amount;
        account.unlockAt = uint32(block.timestamp) + _unbondingDelay;
        _emitStake(msg.sender);
    }

    /// @inheritdoc IProviderRegistry
    function withdraw() external nonReentrant {
        Account storage account = _accounts[msg.sender];
        uint96 amount = account.unbonding;
        if (amount == 0) revert NothingToWithdraw(msg.sender);
        if (block.timestamp < account.unlockAt) revert StillUnbonding(msg.sender, account.unlockAt);
        account.unbonding = 0;
        account.unlockAt = 0;
        _emitStake(msg.sender);
        _TOKEN.safeTransfer(msg.sender, amount);
    }

    // ---------------------------------------------------------------- machines

    /// @inheritdoc IProviderRegistry
    function addMachine(
        bytes32 model,
        uint16 units,
        uint32 vramMiB,
        uint8 interconnect,
        string calldata region,
        bytes32 cluster
    ) external returns (uint32 machineId) {
        _requireRegistered(msg.sender);
        _checkMachine(model, units, interconnect, region);
        machineId = ++_lastMachineId;
        _machines[machineId] = Machine({
            owner: msg.sender,
            units: units,
            onDemandUsed: 0,
            interruptibleUsed: 0,
            vramMiB: vramMiB,
            interconnect: interconnect,
            model: model,
            cluster: cluster,
            region: region
        });
        ++_standing[msg.sender].machineCount;
        emit MachineAdded(machineId, msg.sender, model, units, vramMiB, interconnect, region, cluster);
        emit CapacityChanged(machineId, 0, 0, units);
    }

    /// @inheritdoc IProviderRegistry
    function updateMachine(
        uint32 machineId,
        bytes32 model,
        uint16 units,
        uint32 vramMiB,
        uint8 interconnect,
        string calldata region,
        bytes32 cluster
    ) external {
        Machine storage machine = _idleMachineOf(machineId, msg.sender);
        _checkMachine(model, units, interconnect, region);
        machine.units = units;
        machine.vramMiB = vramMiB;
        machine.interconnect = interconnect;
        machine.model = model;
        machine.cluster = cluster;
        machine.region = region;
        emit MachineUpdated(machineId, msg.sender, model, units, vramMiB, interconnect, region, cluster);
        emit CapacityChanged(machineId, 0, 0, units);
    }

    /// @inheritdoc IProviderRegistry
    function removeMachine(uint32 machineId) external {
        _idleMachineOf(machineId, msg.sender);
        delete _machines[machineId];
        --_standing[msg.sender].machineCount;
        emit MachineRemoved(machineId, msg.sender);
        emit CapacityChanged(machineId, 0, 0, 0);
    }

    // ---------------------------------------------------------------- offer nonces

    /// @inheritdoc IProviderRegistry
    function revokeNonce(uint64 nonce) external {
        _nonceBitmap[msg.sender][nonce >> 8] |= uint256(1) << (nonce & 0xff);
        emit OfferNonceRevoked(msg.sender, nonce);
    }

    /// @inheritdoc IProviderRegistry
    function revokeNoncesBelow(uint64 floor) external {
        Funds storage funds = _funds[msg.sender];
        uint64 current = funds.nonceFloor;
        if (floor <= current) revert NonceFloorNotRaised(current, floor);
        funds.nonceFloor = floor;
        emit OfferNonceFloorRaised(msg.sender, floor);
    }

    // ---------------------------------------------------------------- governance

    /// @inheritdoc IProviderRegistry
    function setUnbondingDelay(uint32 delay) external onlyRole(DEFAULT_ADMIN_ROLE) {
        _setUnbondingDelay(delay);
    }

    /// @inheritdoc IProviderRegistry
    function setFaultQuorum(uint8 quorum) external onlyRole(DEFAULT_ADMIN_ROLE) {
        _setFaultQuorum(quorum);
    }

    /// @inheritdoc IProviderRegistry
    function setFaultQuorumBps(uint16 bps) external onlyRole(DEFAULT_ADMIN_ROLE) {
        if (bps != 0 && (bps < MIN_FAULT_QUORUM_BPS || bps > BPS)) revert InvalidFaultQuorumBps(bps, MIN_FAULT_QUORUM_BPS, BPS);
        _faultQuorumBps = bps;
        emit FaultQuorumBpsChanged(bps);
    }

    /// @inheritdoc IProviderRegistry
    function setAttestorStaking(address staking) external onlyRole(DEFAULT_ADMIN_ROLE) {
        if (staking != address(0)) {
            // One lineage: a staking that does not name the last one attached (a rollback to an older one, one that
            // skips a generation, or an unrelated one) would not see that one's records, and could slash its lies again.
            address expected = address(_lastAttestorStaking);
            address named = IAttestorStaking(staking).predecessor();
            if (named != expected) revert StakingNotSuccessor(staking, named, expected);
            _lastAttestorStaking = IAttestorStaking(staking);
        }
        _attestorStaking = IAttestorStaking(staking);
        emit AttestorStakingChanged(staking);
    }

    // ---------------------------------------------------------------- market role

    /// @dev MARKET_ROLE reserves and releases every provider's collateral (a release sends the slash to its caller): it is
    ///      a wire between two contracts, not a governance power, and every lease's end needs it. So it is granted once,
    ///      to a contract whose `registry()` is this registry, and can never be revoked or granted again: no admin, whether
    ///      the timelock or a stolen key, can give another account the power to take stake, or cut the market off and
    ///      freeze every renter's deposit (docs/contracts.md, "Roles and the timelock").
    function _grantRole(bytes32 role, address account) internal override returns (bool) {
        if (role == MARKET_ROLE) {
            if (getRoleMemberCount(MARKET_ROLE) != 0) revert MarketRoleFixed(getRoleMember(MARKET_ROLE, 0));
            if (!_isMarketOfThis(account)) revert MarketRoleNotAMarket(account);
        }
        return super._grantRole(role, account);
    }

    /// @dev Also covers renounceRole: the market never calls it, and no one else can renounce for it.
    function _revokeRole(bytes32 role, address account) internal override returns (bool) {
        if (role == MARKET_ROLE && hasRole(MARKET_ROLE, account)) revert MarketRoleFixed(account);
        return super._revokeRole(role, account);
    }

    /// @dev A contract (not an EOA, nor an EIP-7702 delegated EOA, whose code is the 23-byte designator 0xef0100 ||
    ///      address) that answers `registry()` with this registry.
    function _isMarketOfThis(address account) private view returns (bool) {
        uint256 size = account.code.length;
        if (size == 0 || (size == 23 && bytes3(account.code) == 0xef0100)) return false;
        // A static call decoded by hand: a contract without registry() (or with a fallback that returns nothing) is
        // refused with MarketRoleNotAMarket, where try/catch would revert while decoding its answer.
        // solhint-disable-next-line avoid-low-level-calls
        (bool ok, bytes memory answer) = account.staticcall(abi.encodeCall(ILeaseMarketRegistry.registry, ()));
        return ok && answer.length == 32 && abi.decode(answer, (uint256)) == uint256(uint160(address(this)));
    }

    // ---------------------------------------------------------------- market hooks

    /// @inheritdoc IProviderRegistry
    function reserve(
        address provider,
        uint32 machineId,
        bytes32 model,
        uint16 units,
        bool interruptible,
        uint96 collateral,
        uint64 offerNonce,
        bool consumeNonce
    ) external onlyRole(MARKET_ROLE) {
        Machine storage machine = _machines[machineId];
        // Only registered providers own machines (deregistering needs every machine removed), so
        // the owner check also checks registration.
        if (machine.owner != provider) revert NotMachineOwner(machineId, provider);
        if (machine.model != model) revert ModelMismatch(machineId, machine.model, model);
        uint16 onDemand = machine.onDemandUsed;
        uint16 interrupt = machine.interruptibleUsed;
        uint16 idle = machine.units - onDemand - interrupt;
        if (units > idle) revert InsufficientUnits(machineId, idle, units);
        // Cannot overflow: units <= idle, so the counters stay within machine.units.
        unchecked {
            if (interruptible) interrupt += units;
            else onDemand += units;
            idle -= units;
        }
        machine.onDemandUsed = onDemand;
        machine.interruptibleUsed = interrupt;
        emit CapacityChanged(machineId, onDemand, interrupt, idle);

        Funds memory funds = _funds[provider];
        _useNonce(provider, funds.nonceFloor, offerNonce, consumeNonce);
        if (collateral > funds.free) revert InsufficientFreeStake(provider, funds.free, collateral);
        // Cannot overflow or underflow: collateral <= free and free + locked <= the registry's balance.
        unchecked {
            funds.free -= collateral;
            funds.locked += collateral;
        }
        _funds[provider] = funds;
    }

    /// @inheritdoc IProviderRegistry
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
    ) external onlyRole(MARKET_ROLE) nonReentrant {
        _freeUnits(machineId, units, interruptible);
        Funds memory funds = _funds[provider];
        // Checked: the market only releases what it locked, and a slash never exceeds the collateral.
        funds.locked -= collateral;
        funds.free += collateral - slashAmount;
        _storeFunds(provider, funds);
        _recordOutcome(provider, interruptible, unitSeconds, outcome);
        if (slashAmount != 0) {
            emit CollateralSlashed(provider, slashTo, slashAmount);
            _emitStake(provider);
            // To the market, which pays it to `slashTo` with the refund (or records it as owed if the token
            // refuses): no receiver can make a lease's end revert.
            _TOKEN.safeTransfer(msg.sender, slashAmount);
        }
    }

    /// @inheritdoc IProviderRegistry
    function lockMore(address provider, uint96 amount, uint64 offerNonce, bool consumeNonce)
        external
        onlyRole(MARKET_ROLE)
    {
        Funds memory funds = _funds[provider];
        _useNonce(provider, funds.nonceFloor, offerNonce, consumeNonce);
        if (amount > funds.free) revert InsufficientFreeStake(provider, funds.free, amount);
        // Cannot overflow or underflow: amount <= free and free + locked <= the registry's balance.
        unchecked {
            funds.free -= amount;
            funds.locked += amount;
        }
        _funds[provider] = funds;
    }

    /// @inheritdoc IProviderRegistry
    function unlockPart(
        address provider,
        uint32 machineId,
        uint16 units,
        bool interruptible,
        uint96 amount,
        uint64 unitSeconds
    ) external onlyRole(MARKET_ROLE) {
        _freeUnits(machineId, units, interruptible);
        Funds memory funds = _funds[provider];
        funds.locked -= amount;
        funds.free += amount;
        _storeFunds(provider, funds);
        _recordOutcome(provider, interruptible, unitSeconds, Outcome.Neutral);
    }

    // ---------------------------------------------------------------- views

    /// @inheritdoc IProviderRegistry
    function token() external view returns (address) {
        return address(_TOKEN);
    }

    /// @inheritdoc IProviderRegistry
    function getProvider(address provider) external view returns (ProviderView memory view_) {
        Funds memory funds = _funds[provider];
        Account memory account = _accounts[provider];
        Standing memory standing = _standing[provider];
        Profile memory profile = _profiles[provider];
        view_ = ProviderView({
            registered: standing.registered,
            stake: funds.free + funds.locked + account.unbonding,
            free: funds.free,
            locked: funds.locked,
            unbonding: account.unbonding,
            unlockAt: account.unlockAt,
            machineCount: standing.machineCount,
            nonceFloor: funds.nonceFloor,
            leasesCompleted: standing.leasesCompleted,
            faults: standing.faults,
            unitSecondsDelivered: standing.unitSecondsDelivered,
            peerId: profile.peerId,
            metadataURI: profile.metadataURI
        });
    }

    /// @inheritdoc IProviderRegistry
    function getMachine(uint32 machineId) external view returns (MachineView memory) {
        Machine memory machine = _machines[machineId];
        return MachineView({
            owner: machine.owner,
            model: machine.model,
            units: machine.units,
            vramMiB: machine.vramMiB,
            interconnect: machine.interconnect,
            region: machine.region,
            cluster: machine.cluster,
            onDemandUnits: machine.onDemandUsed,
            interruptibleUnits: machine.interruptibleUsed
        });
    }

    /// @inheritdoc IProviderRegistry
    function capacityOf(uint32 machineId)
        external
        view
        returns (uint16 units, uint16 onDemandUnits, uint16 interruptibleUnits)
    {
        Machine storage machine = _machines[machineId];
        return (machine.units, machine.onDemandUsed, machine.interruptibleUsed);
    }

    /// @inheritdoc IProviderRegistry
    function freeStake(address provider) external view returns (uint96) {
        return _funds[provider].free;
    }

    /// @inheritdoc IProviderRegistry
    function isNonceUsable(address provider, uint64 nonce) external view returns (bool) {
        if (nonce < _funds[provider].nonceFloor) return false;
        return _nonceBitmap[provider][nonce >> 8] & (uint256(1) << (nonce & 0xff)) == 0;
    }

    /// @inheritdoc IProviderRegistry
    function isAttestor(address account) external view returns (bool) {
        if (!hasRole(ATTESTOR_ROLE, account)) return false;
        IAttestorStaking staking = _attestorStaking;
        return address(staking) == address(0) || staking.isStaked(account);
    }

    /// @inheritdoc IProviderRegistry
    function attestorStaking() external view returns (address) {
        return address(_attestorStaking);
    }

    /// @inheritdoc IProviderRegistry
    function faultQuorum() external view returns (uint8) {
        uint8 floor = _faultQuorum;
        uint16 bps = _faultQuorumBps;
        if (bps == 0) return floor;
        uint256 share = Math.mulDiv(bps, getRoleMemberCount(ATTESTOR_ROLE), BPS, Math.Rounding.Ceil);
        // A fault carries at most MAX_FAULT_QUORUM signatures: a larger share would make every fault impossible.
        if (share > MAX_FAULT_QUORUM) share = MAX_FAULT_QUORUM;
        return share > floor ? uint8(share) : floor;
    }

    /// @inheritdoc IProviderRegistry
    function faultQuorumParams() external view returns (uint8 floor, uint16 bps) {
        return (_faultQuorum, _faultQuorumBps);
    }

    /// @inheritdoc IProviderRegistry
    function attestorCount() external view returns (uint256) {
        return getRoleMemberCount(ATTESTOR_ROLE);
    }

    /// @inheritdoc IProviderRegistry
    function unbondingDelay() external view returns (uint32) {
        return _unbondingDelay;
    }

    /// @inheritdoc IProviderRegistry
    function lastMachineId() external view returns (uint32) {
        return _lastMachineId;
    }

    // ---------------------------------------------------------------- internals

    function _requireRegistered(address provider) private view {
        if (!_standing[provider].registered) revert NotRegistered(provider);
    }

    function _checkProfile(string calldata peerId, string calldata metadataURI) private pure {
        uint256 length = bytes(peerId).length;
        if (length == 0 || length > MAX_PEER_ID_LENGTH) revert InvalidPeerId(length, MAX_PEER_ID_LENGTH);
        length = bytes(metadataURI).length;
        if (length > MAX_METADATA_URI_LENGTH) revert InvalidMetadataURI(length, MAX_METADATA_URI_LENGTH);
    }

    function _checkMachine(bytes32 model, uint16 units, uint8 interconnect, string calldata region) private pure {
        if (model == bytes32(0)) revert ZeroModel();
        if (units == 0) revert InvalidUnitCount(units);
        if (interconnect > MAX_INTERCONNECT) revert InvalidInterconnect(interconnect);
        uint256 length = bytes(region).length;
        if (length == 0 || length > MAX_REGION_LENGTH) revert InvalidRegion(length, MAX_REGION_LENGTH);
    }

    /// @dev The caller's machine, which must hold no lease.
    function _idleMachineOf(uint32 machineId, address account) private view returns (Machine storage machine) {
        machine = _machines[machineId];
        if (machine.owner != account) revert NotMachineOwner(machineId, account);
        uint16 used = machine.onDemandUsed + machine.interruptibleUsed;
        if (used != 0) revert MachineLeased(machineId, used);
    }

    function _freeUnits(uint32 machineId, uint16 units, bool interruptible) private {
        Machine storage machine = _machines[machineId];
        // Checked: the market only frees units it reserved.
        uint16 onDemand = machine.onDemandUsed;
        uint16 interrupt = machine.interruptibleUsed;
        if (interruptible) interrupt -= units;
        else onDemand -= units;
        machine.onDemandUsed = onDemand;
        machine.interruptibleUsed = interrupt;
        emit CapacityChanged(machineId, onDemand, interrupt, machine.units - onDemand - interrupt);
    }

    function _useNonce(address provider, uint64 floor, uint64 nonce, bool consume) private {
        if (nonce < floor) revert InvalidOfferNonce(provider, nonce);
        uint256 word = nonce >> 8;
        uint256 bit = uint256(1) << (nonce & 0xff);
        uint256 bits = _nonceBitmap[provider][word];
        if (bits & bit != 0) revert InvalidOfferNonce(provider, nonce);
        if (consume) _nonceBitmap[provider][word] = bits | bit;
    }

    function _recordOutcome(address provider, bool interruptible, uint64 unitSeconds, Outcome outcome) private {
        // Only on-demand time counts (issue #34, finding 5): an interruptible lease yields to any real renter, so a
        // provider renting its idle units to itself that way gives up no sale and would farm reputation for
        // nothing. Its faults still count.
        if (interruptible) {
            if (outcome != Outcome.Faulted) return;
            unitSeconds = 0;
        }
        if (unitSeconds == 0 && outcome == Outcome.Neutral) return;
        // Read once, counted in memory (checked: a counter never wraps), written back as one word: field by field
        // through a storage pointer, each counter was a read and a write of the same slot.
        Standing memory standing = _standing[provider];
        if (unitSeconds != 0) standing.unitSecondsDelivered += unitSeconds;
        // A lease counts as completed only if it delivered paid service: an unactivated or zero-length lease
        // (a provider renting from itself for gas only) adds nothing.
        if (outcome == Outcome.Completed) {
            if (unitSeconds != 0) ++standing.leasesCompleted;
        }
        else if (outcome == Outcome.Faulted) ++standing.faults;
        uint256 word = uint256(standing.leasesCompleted) | (uint256(standing.faults) << 64)
            | (uint256(standing.unitSecondsDelivered) << 128) | (uint256(standing.machineCount) << 216)
            | (standing.registered ? uint256(1) << 248 : 0);
        uint256 slot = _slotOf(provider, _standingSlot());
        // solhint-disable-next-line no-inline-assembly
        assembly ("memory-safe") {
            sstore(slot, word)
        }
    }

    /// @dev Writes a provider's Funds as one word (the compiler copies a memory struct to storage field by field:
    ///      a read and a write of the same slot per field).
    function _storeFunds(address provider, Funds memory funds) private {
        uint256 word = uint256(funds.free) | (uint256(funds.locked) << 96) | (uint256(funds.nonceFloor) << 192);
        uint256 slot = _slotOf(provider, _fundsSlot());
        // solhint-disable-next-line no-inline-assembly
        assembly ("memory-safe") {
            sstore(slot, word)
        }
    }

    /// @dev The storage slot of `key` in the mapping at `mappingSlot`: keccak256(key . mappingSlot), Solidity's layout.
    function _slotOf(address key, uint256 mappingSlot) private pure returns (uint256 slot) {
        // solhint-disable-next-line no-inline-assembly
        assembly ("memory-safe") {
            mstore(0, and(key, 0xffffffffffffffffffffffffffffffffffffffff))
            mstore(0x20, mappingSlot)
            slot := keccak256(0, 0x40)
        }
    }

    function _fundsSlot() private pure returns (uint256 slot) {
        // solhint-disable-next-line no-inline-assembly
        assembly ("memory-safe") {
            slot := _funds.slot
        }
    }

    function _standingSlot() private pure returns (uint256 slot) {
        // solhint-disable-next-line no-inline-assembly
        assembly ("memory-safe") {
            slot := _standing.slot
        }
    }

    function _emitStake(address provider) private {
        Funds storage funds = _funds[provider];
        Account storage account = _accounts[provider];
        uint96 free = funds.free;
        uint96 unbonding = account.unbonding;
        emit StakeChanged(provider, free + funds.locked + unbonding, free, unbonding, account.unlockAt);
    }

    function _setUnbondingDelay(uint32 delay) private {
        if (delay > MAX_UNBONDING_DELAY) revert UnbondingDelayTooLong(delay, MAX_UNBONDING_DELAY);
        _unbondingDelay = delay;
        emit UnbondingDelayChanged(delay);
    }

    function _setFaultQuorum(uint8 quorum) private {
        if (quorum == 0 || quorum > MAX_FAULT_QUORUM) revert InvalidFaultQuorum(quorum, MAX_FAULT_QUORUM);
        _faultQuorum = quorum;
        emit FaultQuorumChanged(quorum);
    }
}
