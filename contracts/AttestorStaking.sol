// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.34;

import {IAccessControl} from "@openzeppelin/contracts/access/IAccessControl.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {IERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/IERC20Permit.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {MessageHashUtils} from "@openzeppelin/contracts/utils/cryptography/MessageHashUtils.sol";
import {ReentrancyGuardTransient} from "@openzeppelin/contracts/utils/ReentrancyGuardTransient.sol";
import {IAttestorStaking} from "./interfaces/IAttestorStaking.sol";
import {ILeaseMarket} from "./interfaces/ILeaseMarket.sol";
import {IProviderRegistry} from "./interfaces/IProviderRegistry.sol";

/// @title AttestorStaking
/// @notice Attestors stake the settlement token; the ProviderRegistry counts an ATTESTOR_ROLE holder as an attestor
///         (for fault quorums and the offer book's attestation quorum) only while it holds minStake here.
///         Anyone may dispute an unexpired attestation by bonding disputeFee; the attestor must answer within
///         answerWindow with the provider's EIP-712 AttestCommitV2 for the attestation's challenge id, whose per-unit
///         roots and GPU UUIDs hash to the attestation's root and gpus (verified here, in the market's Suanli domain): a
///         commit the provider signed proves that the provider took part in that challenge and committed those roots.
///         No answer: slashAmount of its stake goes to the sink, and the fee returns to the disputer (no share: the
///         liar itself can dispute first). An answer: the fee goes to the attestor. Payouts are credited and claimed
///         (`claim`), so no receiver that refuses tokens blocks a dispute. A fault contradicted by the same attestor's
///         own receipt within the fault window after observedAt is slashed at once, with no answer: a liveness fault
///         (kind 1) by a ProbeReceipt (a heartbeat it counted; disputeFault), a capacity fault (kind 2) by an
///         Attestation that the leased machine passed (disputeCapacityFault); the disputerShareBps share of that slash
///         goes to the lease's provider, whoever sends the evidence.
///         Invariant: token.balanceOf(this) == sum(active + unbonding) + sum(open dispute fees) + sum(owed).
///         Replacement: a staking names the one it replaces (predecessor). Only the registry's current staking takes new
///         disputes, and it first checks its predecessors' records, so one lie (attestation or fault) is slashed once
///         across them, and one not disputed yet stays slashable in the current one.
/// @dev What it cannot catch: an attestor and a provider who collude (the provider signs any commit), and an
///      attestor that passes a provider whose opened rows were wrong (the rows are opened to the attestor only).
contract AttestorStaking is IAttestorStaking, ReentrancyGuardTransient {
    using SafeERC20 for IERC20;

    /// @notice EIP-712 type hash of the Attestation an attestor signs (common/eip712.ts).
    bytes32 public constant ATTESTATION_TYPEHASH = keccak256(
        "Attestation(address provider,uint32 machineId,bytes32 model,uint16 units,uint32 vramMiB,uint64 throughput,uint32 issuedAt,uint32 expiry,bytes32 challengeId,bytes32 root,bytes32 gpus,bytes32 cc,uint16 failures,uint32 lastFailureAt)"
    );
    /// @notice EIP-712 type hash of the commit a provider signs (common/attest/commit.ts).
    bytes32 public constant ATTEST_COMMIT_TYPEHASH =
        keccak256("AttestCommitV2(bytes32 challengeId,uint32 rowsPerUnit,bytes32[] roots,string[] devices)");
    /// @notice EIP-712 type hash of the market's Fault (LeaseMarketBase.FAULT_TYPEHASH; common/eip712.ts).
    bytes32 public constant FAULT_TYPEHASH = keccak256("Fault(uint256 leaseId,uint8 kind,uint32 observedAt)");
    /// @notice EIP-712 type hash of an attestor's receipt of a heartbeat (common/eip712.ts ProbeReceipt).
    bytes32 public constant PROBE_RECEIPT_TYPEHASH = keccak256("ProbeReceipt(uint256 leaseId,bytes32 challenge,uint64 receivedAtMs)");
    /// @notice The liveness fault kind (unresponsive): contradicted by its signer's own ProbeReceipt (disputeFault).
    uint8 public constant LIVENESS_FAULT = 1;
    /// @notice The capacity fault kind: contradicted by its signer's own Attestation of the leased machine
    ///         (disputeCapacityFault).
    uint8 public constant CAPACITY_FAULT = 2;
    /// @notice Bounds of the fault window (seconds).
    uint32 public constant MIN_FAULT_WINDOW = 1;
    uint32 public constant MAX_FAULT_WINDOW = 1 days;
    /// @notice A raised fault window applies only to faults observed this long after the raise: attestors that waited
    ///         the old window before signing never become slashable by a later raise (lowering applies at once).
    uint32 public constant FAULT_WINDOW_RAISE_NOTICE = 1 days;
    /// @notice The most of a slash governance may pay the disputer: above half, an attestor disputing itself would
    ///         recover more than it loses.
    uint16 public constant MAX_DISPUTER_SHARE_BPS = 5_000;
    /// @notice Bounds of the answer window.
    uint32 public constant MIN_ANSWER_WINDOW = 10 minutes;
    uint32 public constant MAX_ANSWER_WINDOW = 30 days;
    /// @notice The longest unbonding delay.
    uint32 public constant MAX_UNBONDING_DELAY = 90 days;

    bytes32 private constant _DOMAIN_TYPEHASH =
        keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)");
    bytes32 private constant _NAME_HASH = keccak256("Suanli");
    bytes32 private constant _VERSION_HASH = keccak256("1");
    uint16 private constant _BPS = 10_000;

    IERC20 private immutable _TOKEN;
    IProviderRegistry private immutable _REGISTRY;
    address private immutable _MARKET;
    /// @dev The staking this one replaces for the same registry and market (zero for the first): its disputes, and
    ///      its predecessors', are checked before this one slashes (lineage).
    IAttestorStaking private immutable _PREDECESSOR;

    Params private _params;
    mapping(address attestor => StakeView) private _stakes;
    mapping(bytes32 id => Dispute) private _disputes;
    mapping(address account => uint256) private _owed;
    mapping(bytes32 id => bool) private _faultsDisputed;
    /// @dev One fault window as set: in force from `from` until the next one's `from`; `floor` is the smallest window
    ///      set up to and including this one.
    struct WindowSet {
        uint32 from;
        uint32 window;
        uint32 floor;
    }
    /// @dev Every fault window set, oldest first (appended when governance changes it).
    WindowSet[] private _windows;
    /// @dev How many of the newest windows _faultWindowFor reads before it falls back to the floor of the older ones.
    uint256 private constant _WINDOW_LOOKBACK = 16;

    /// @notice Deploys the staking for one registry and market (whose EIP-712 domain attestations are signed in).
    /// @param registry_ The ProviderRegistry (its token is staked; its governance sets the parameters).
    /// @param market_ The LeaseMarket: the verifyingContract of the Suanli domain.
    /// @param params_ The first parameters.
    /// @param predecessor_ The AttestorStaking this one replaces (same registry and market; its faultWindow no smaller
    ///        than params_.faultWindow), or zero for the first. A lie disputed in it (or its predecessors) is never
    ///        disputed here.
    constructor(address registry_, address market_, Params memory params_, address predecessor_) {
        _REGISTRY = IProviderRegistry(registry_);
        _TOKEN = IERC20(IProviderRegistry(registry_).token());
        _MARKET = market_;
        _PREDECESSOR = IAttestorStaking(predecessor_);
        if (predecessor_ != address(0)) {
            // A contract that did not exist yet cannot be named, so the lineage has no cycle and every walk ends.
            if (predecessor_.code.length == 0) revert PredecessorMismatch(predecessor_, "code");
            if (IAttestorStaking(predecessor_).registry() != registry_) revert PredecessorMismatch(predecessor_, "registry");
            if (IAttestorStaking(predecessor_).market() != market_) revert PredecessorMismatch(predecessor_, "market");
            // Attestors waited the predecessor's window: starting larger would make their honest faults slashable
            // here. Start at most at it, then raise with setParams (the raise notice protects them).
            uint32 inherited = IAttestorStaking(predecessor_).params().faultWindow;
            if (params_.faultWindow > inherited) revert ParamOutOfRange("faultWindow", params_.faultWindow, MIN_FAULT_WINDOW, inherited);
        }
        _setParams(params_);
    }

    // ---------------------------------------------------------------- stake

    /// @inheritdoc IAttestorStaking
    function stake(uint96 amount) external nonReentrant {
        _stake(msg.sender, amount);
    }

    /// @inheritdoc IAttestorStaking
    function stakeFor(address attestor, uint96 amount) external nonReentrant {
        if (attestor == address(0)) revert ZeroRecipient();
        _stake(attestor, amount);
    }

    /// @inheritdoc IAttestorStaking
    function stakeWithPermit(uint96 amount, uint256 deadline, uint8 v, bytes32 r, bytes32 s) external nonReentrant {
        // A front-runner may have used the permit already: the allowance it set is what counts.
        try IERC20Permit(address(_TOKEN)).permit(msg.sender, address(this), amount, deadline, v, r, s) {} catch {}
        _stake(msg.sender, amount);
    }

    /// @inheritdoc IAttestorStaking
    function requestUnstake(uint96 amount) external {
        if (amount == 0) revert ZeroAmount();
        StakeView storage stake_ = _stakes[msg.sender];
        uint96 active = stake_.active;
        if (amount > active) revert InsufficientStake(msg.sender, active, amount);
        unchecked {
            stake_.active = active - amount;
        }
        stake_.unbonding += amount;
        stake_.unlockAt = uint32(block.timestamp) + _params.unbondingDelay;
        _emitStake(msg.sender);
    }

    /// @inheritdoc IAttestorStaking
    function withdraw() external nonReentrant {
        StakeView storage stake_ = _stakes[msg.sender];
        uint96 amount = stake_.unbonding;
        if (amount == 0) revert NothingToWithdraw(msg.sender);
        if (block.timestamp < stake_.unlockAt) revert StillUnbonding(msg.sender, stake_.unlockAt);
        if (stake_.openDisputes != 0) revert DisputesOpen(msg.sender, stake_.openDisputes);
        stake_.unbonding = 0;
        stake_.unlockAt = 0;
        _emitStake(msg.sender);
        _TOKEN.safeTransfer(msg.sender, amount);
    }

    // ---------------------------------------------------------------- disputes

    /// @inheritdoc IAttestorStaking
    function disputeAttestation(Attestation calldata attestation, bytes calldata signature) external nonReentrant returns (bytes32 id) {
        if (block.timestamp >= attestation.expiry) revert AttestationExpired(attestation.expiry);
        id = _attestationDigest(attestation);
        (address attestor, ECDSA.RecoverError error_,) = ECDSA.tryRecoverCalldata(id, signature);
        if (error_ != ECDSA.RecoverError.NoError) revert InvalidSignature();
        if (_disputes[id].state != DisputeState.None) revert AlreadyDisputed(id);
        _requireCurrent();
        _checkLineage(id);
        StakeView storage stake_ = _stakes[attestor];
        if (stake_.active == 0 && stake_.unbonding == 0) revert NothingAtStake(attestor);
        ++stake_.openDisputes;
        uint96 fee = _params.disputeFee;
        uint32 answerBy = uint32(block.timestamp) + _params.answerWindow;
        _disputes[id] = Dispute({attestor: attestor, answerBy: answerBy, state: DisputeState.Open, disputer: msg.sender, fee: fee});
        emit DisputeOpened(id, attestor, msg.sender, attestation.provider, attestation.machineId, attestation.challengeId, answerBy, fee);
        _pull(fee);
    }

    /// @inheritdoc IAttestorStaking
    function answerDispute(Attestation calldata attestation, Commit calldata commit, bytes calldata commitSignature) external {
        bytes32 id = _attestationDigest(attestation);
        Dispute storage dispute = _disputes[id];
        if (dispute.state != DisputeState.Open) revert DisputeNotOpen(id);
        if (block.timestamp > dispute.answerBy) revert AnswerWindowClosed(id, dispute.answerBy);
        if (commit.roots.length != attestation.units) revert CommitMismatch("units");
        bytes32 rootsHash = keccak256(abi.encodePacked(commit.roots));
        if (rootsHash != attestation.root) revert CommitMismatch("root");
        if (_gpusHash(commit.devices, commit.sortedOrder) != attestation.gpus) revert CommitMismatch("gpus");
        bytes32 digest = _hashTyped(
            keccak256(abi.encode(ATTEST_COMMIT_TYPEHASH, attestation.challengeId, commit.rowsPerUnit, rootsHash, _hashStrings(commit.devices)))
        );
        (address signer, ECDSA.RecoverError error_,) = ECDSA.tryRecoverCalldata(digest, commitSignature);
        if (error_ != ECDSA.RecoverError.NoError || signer != attestation.provider) {
            revert NotProviderCommit(signer, attestation.provider);
        }
        address attestor = dispute.attestor;
        uint96 fee = dispute.fee;
        dispute.state = DisputeState.Answered;
        --_stakes[attestor].openDisputes;
        // Credited to the attestor whoever sends the answer: answering for it gains a front-runner nothing.
        _owed[attestor] += fee;
        emit DisputeAnswered(id, attestor, fee);
    }

    /// @inheritdoc IAttestorStaking
    function resolveDispute(bytes32 id) external {
        Dispute storage dispute = _disputes[id];
        if (dispute.state != DisputeState.Open) revert DisputeNotOpen(id);
        if (block.timestamp <= dispute.answerBy) revert AnswerWindowOpen(id, dispute.answerBy);
        dispute.state = DisputeState.Slashed;
        address attestor = dispute.attestor;
        --_stakes[attestor].openDisputes;
        _owed[dispute.disputer] += dispute.fee;
        // No share to the disputer (issue #34, finding 6): the liar can dispute its own attestation first, so any
        // share would come back to it. The whole slash goes to the sink; the disputer gets its fee back.
        _slash(id, attestor, dispute.disputer, 0);
    }

    /// @inheritdoc IAttestorStaking
    function disputeFault(Fault calldata fault, bytes calldata faultSignature, ProbeReceipt calldata receipt, bytes calldata receiptSignature)
        external
        nonReentrant
        returns (bytes32 id)
    {
        if (fault.kind != LIVENESS_FAULT) revert NotALivenessFault(fault.kind);
        if (fault.leaseId != receipt.leaseId) revert LeaseMismatch(fault.leaseId, receipt.leaseId);
        _requireCurrent();
        uint32 window = _faultWindowFor(fault.observedAt);
        // Both bounds in uint256: observedAt + faultWindow never overflows, and the ms fit easily.
        uint256 fromMs = (uint256(fault.observedAt) + 1) * 1000;
        uint256 toMs = (uint256(fault.observedAt) + window) * 1000;
        if (receipt.receivedAtMs < fromMs || receipt.receivedAtMs > toMs) revert ReceiptOutsideWindow(receipt.receivedAtMs, fromMs, toMs);
        bytes32 faultDigest = _faultDigest(fault);
        address attestor = _faultSigner(faultDigest, faultSignature);
        bytes32 receiptDigest = _hashTyped(keccak256(abi.encode(PROBE_RECEIPT_TYPEHASH, receipt.leaseId, receipt.challenge, receipt.receivedAtMs)));
        (address receiptSigner, ECDSA.RecoverError receiptError,) = ECDSA.tryRecoverCalldata(receiptDigest, receiptSignature);
        if (receiptError != ECDSA.RecoverError.NoError) revert InvalidReceiptSignature();
        if (receiptSigner != attestor) revert SignersDiffer(attestor, receiptSigner);
        // A lease the market never opened wronged nobody: all of the slash goes to the sink.
        address provider = ILeaseMarket(_MARKET).getLease(fault.leaseId).provider;
        return _slashFault(fault, faultDigest, attestor, provider, receipt.receivedAtMs);
    }

    /// @inheritdoc IAttestorStaking
    function disputeCapacityFault(
        Fault calldata fault,
        bytes calldata faultSignature,
        Attestation calldata attestation,
        bytes calldata attestationSignature
    ) external nonReentrant returns (bytes32 id) {
        if (fault.kind != CAPACITY_FAULT) revert NotACapacityFault(fault.kind);
        _requireCurrent();
        ILeaseMarket.LeaseView memory lease = ILeaseMarket(_MARKET).getLease(fault.leaseId);
        // The machine the fault says failed, proving at least the capacity the lease holds.
        if (attestation.provider != lease.provider || attestation.machineId != lease.machineId || attestation.units < lease.units) {
            revert AttestationNotOfLease(fault.leaseId, attestation.provider, attestation.machineId, attestation.units);
        }
        uint256 from = uint256(fault.observedAt) + 1;
        uint256 to = uint256(fault.observedAt) + _faultWindowFor(fault.observedAt);
        if (attestation.issuedAt < from || attestation.issuedAt > to) revert AttestationOutsideWindow(attestation.issuedAt, from, to);
        bytes32 faultDigest = _faultDigest(fault);
        address attestor = _faultSigner(faultDigest, faultSignature);
        (address passSigner, ECDSA.RecoverError passError,) = ECDSA.tryRecoverCalldata(_attestationDigest(attestation), attestationSignature);
        if (passError != ECDSA.RecoverError.NoError) revert InvalidReceiptSignature();
        if (passSigner != attestor) revert SignersDiffer(attestor, passSigner);
        return _slashFault(fault, faultDigest, attestor, lease.provider, uint64(attestation.issuedAt) * 1000);
    }

    /// @inheritdoc IAttestorStaking
    function claim(address to) external nonReentrant {
        if (to == address(0)) revert ZeroRecipient();
        uint256 amount = _owed[msg.sender];
        if (amount == 0) revert ZeroAmount();
        _owed[msg.sender] = 0;
        emit Claimed(msg.sender, to, amount);
        _TOKEN.safeTransfer(to, amount);
    }

    // ---------------------------------------------------------------- governance

    /// @inheritdoc IAttestorStaking
    function setParams(Params calldata params_) external {
        if (!IAccessControl(address(_REGISTRY)).hasRole(bytes32(0), msg.sender)) revert NotGovernance(msg.sender);
        _setParams(params_);
    }

    // ---------------------------------------------------------------- views

    /// @inheritdoc IAttestorStaking
    function isStaked(address account) external view returns (bool) {
        return _stakes[account].active >= _params.minStake;
    }

    /// @notice An attestor's stake.
    /// @param attestor The attestor.
    /// @return The active and unbonding stake, the unlock time and the open disputes against it.
    function stakeOf(address attestor) external view returns (StakeView memory) {
        return _stakes[attestor];
    }

    /// @notice A dispute (keyed by the disputed attestation's EIP-712 digest).
    /// @param id The dispute id.
    /// @return The dispute.
    function getDispute(bytes32 id) external view returns (Dispute memory) {
        return _disputes[id];
    }

    /// @notice What `account` may claim.
    /// @param account The account.
    /// @return The amount.
    function owed(address account) external view returns (uint256) {
        return _owed[account];
    }

    /// @notice The id of a fault dispute: keccak256 of the fault's EIP-712 digest (market's domain) and its signer.
    /// @param fault The fault.
    /// @param attestor The fault's signer.
    /// @return The id (disputeFault's, AttestorSlashed's and AlreadyDisputed's).
    function faultDisputeId(Fault calldata fault, address attestor) external view returns (bytes32) {
        return keccak256(abi.encode(_faultDigest(fault), attestor));
    }

    /// @notice The fault window a receipt must fall in for a fault observed at `observedAt`: the smallest window in force
    ///         at any time from `observedAt - FAULT_WINDOW_RAISE_NOTICE` on. An attestor signs a fault after waiting the
    ///         window it last read, which may be up to the notice old, and a window set later may be lower; so a raise
    ///         reaches only faults observed the notice after it, a lowering reaches every fault, and a raise never
    ///         weakens the rule for faults observed after an earlier raise took effect. When that span began before this
    ///         contract was deployed, the predecessor's faultWindowFor(observedAt) counts too (one history across a
    ///         replacement).
    /// @param observedAt The fault's observedAt.
    /// @return The window in seconds.
    function faultWindowFor(uint32 observedAt) external view returns (uint32) {
        return _faultWindowFor(observedAt);
    }

    /// @notice Whether the fault dispute `id` (faultDisputeId) has slashed its attestor.
    /// @param id The id.
    /// @return Whether it was slashed.
    function faultDisputed(bytes32 id) external view returns (bool) {
        return _faultsDisputed[id];
    }

    /// @inheritdoc IAttestorStaking
    function disputeRecord(bytes32 id) external view returns (bool recorded, address predecessor_) {
        return (_recorded(id), address(_PREDECESSOR));
    }

    /// @inheritdoc IAttestorStaking
    function disputedIn(bytes32 id) external view returns (address staking) {
        address hop = address(this);
        while (hop != address(0)) {
            (bool recorded, address next) = hop == address(this) ? (_recorded(id), address(_PREDECESSOR)) : IAttestorStaking(hop).disputeRecord(id);
            if (recorded) return hop;
            hop = next;
        }
        return address(0);
    }

    /// @inheritdoc IAttestorStaking
    function predecessor() external view returns (address) {
        return address(_PREDECESSOR);
    }

    /// @inheritdoc IAttestorStaking
    function registry() external view returns (address) {
        return address(_REGISTRY);
    }

    /// @inheritdoc IAttestorStaking
    function market() external view returns (address) {
        return _MARKET;
    }

    /// @notice The parameters.
    /// @return The parameters.
    function params() external view returns (Params memory) {
        return _params;
    }

    /// @notice The staked token (the registry's).
    /// @return The token.
    function token() external view returns (address) {
        return address(_TOKEN);
    }

    /// @notice The EIP-712 digest of an attestation in the market's Suanli domain: a dispute's id.
    /// @param attestation The attestation.
    /// @return The digest.
    function attestationDigest(Attestation calldata attestation) external view returns (bytes32) {
        return _attestationDigest(attestation);
    }

    // ---------------------------------------------------------------- internals

    /// @dev Whether this contract recorded a dispute `id`: an attestation dispute (open, answered or slashed) or a
    ///      slashed fault. The two id spaces cannot meet: an attestation's is an EIP-712 digest (keccak256 of 66
    ///      bytes), a fault's keccak256 of 64.
    function _recorded(bytes32 id) private view returns (bool) {
        return _faultsDisputed[id] || _disputes[id].state != DisputeState.None;
    }

    /// @dev Only the registry's current staking takes new disputes. A retired one (or one not attached yet) would let
    ///      anyone record a dispute against a dust stake there (stakeFor) and so block the slash of the same lie in the
    ///      current staking, where the attestor's real stake is: one lie, one slash, of the stake that counts. Stakes are
    ///      taken anywhere (attestors stake in a replacement before governance attaches it); a retired staking still
    ///      unbonds, answers and resolves its open disputes, and pays what it owes.
    function _requireCurrent() private view {
        address current = _REGISTRY.attestorStaking();
        if (current != address(this)) revert NotCurrentStaking(current);
    }

    /// @dev Walks the predecessors, newest first, and reverts when one recorded `id`: a lie slashed (or disputed) in a
    ///      staking this one replaced is not slashed again here. The caller checked this contract's own record. The walk
    ///      ends: every predecessor existed before its successor (constructor).
    function _checkLineage(bytes32 id) private view {
        address hop = address(_PREDECESSOR);
        while (hop != address(0)) {
            (bool recorded, address next) = IAttestorStaking(hop).disputeRecord(id);
            if (recorded) revert DisputedInLineage(id, hop);
            hop = next;
        }
    }

    /// @dev Credits `attestor` with `amount` paid by the caller.
    function _stake(address attestor, uint96 amount) private {
        if (amount == 0) revert ZeroAmount();
        StakeView storage stake_ = _stakes[attestor];
        // The whole stake must fit 96 bits, so moving it to unbonding or slashing it can never overflow.
        uint256 total = uint256(stake_.active) + stake_.unbonding + amount;
        if (total > type(uint96).max) revert ParamOutOfRange("stake", total, 1, type(uint96).max);
        stake_.active += amount;
        _emitStake(attestor);
        _pull(amount);
    }

    /// @dev Measured, so a fee-on-transfer token can never leave the books short of what they record.
    function _pull(uint256 amount) private {
        uint256 before = _TOKEN.balanceOf(address(this));
        _TOKEN.safeTransferFrom(msg.sender, address(this), amount);
        uint256 received = _TOKEN.balanceOf(address(this)) - before;
        if (received != amount) revert TokenTransferShortfall(amount, received);
    }

    function _attestationDigest(Attestation calldata a) private view returns (bytes32) {
        // Every field is static, so the struct's ABI encoding is EIP-712's encodeData: the fields' 32-byte words in order.
        return _hashTyped(keccak256(abi.encode(ATTESTATION_TYPEHASH, a)));
    }

    /// @dev Slashes `attestor` for dispute `id`: slashAmount, capped by its active and unbonding stake, taken from the
    ///      active stake first, then the unbonding; `shareBps` of it credited to `disputer`, the rest to the sink.
    function _slash(bytes32 id, address attestor, address disputer, uint16 shareBps) private returns (uint96 amount) {
        StakeView storage stake_ = _stakes[attestor];
        uint96 active = stake_.active;
        uint96 unbonding = stake_.unbonding;
        amount = _params.slashAmount;
        // Active stake first, then unbonding: an attestor cannot shelter its stake by requesting to unstake.
        // Cannot overflow: _stake keeps active + unbonding within 96 bits.
        if (amount > active + unbonding) amount = active + unbonding;
        unchecked {
            if (amount <= active) {
                stake_.active = active - amount;
            } else {
                stake_.active = 0;
                stake_.unbonding = unbonding - (amount - active);
            }
        }
        uint96 toDisputer = uint96(uint256(amount) * shareBps / _BPS);
        uint96 toSink = amount - toDisputer;
        address sink = _params.sink;
        _owed[disputer] += toDisputer;
        _owed[sink] += toSink;
        _emitStake(attestor);
        emit AttestorSlashed(id, attestor, amount, disputer, toDisputer, sink, toSink);
    }

    /// @dev The signer of a fault's digest. tryRecoverCalldata takes 65-byte r, s, v only and refuses high s (malleable)
    ///      signatures, as the market does.
    function _faultSigner(bytes32 faultDigest, bytes calldata faultSignature) private pure returns (address attestor) {
        ECDSA.RecoverError faultError;
        (attestor, faultError,) = ECDSA.tryRecoverCalldata(faultDigest, faultSignature);
        if (faultError != ECDSA.RecoverError.NoError) revert InvalidFaultSignature();
    }

    /// @dev Slashes `attestor` for its fault that its own receipt (at `atMs`) contradicted: once per fault and attestor,
    ///      across both dispute paths and the lineage. The share goes to the lease's `provider`, the party the false fault
    ///      wronged, whoever sends the evidence: the liar (who holds both signatures) disputing itself first, or a
    ///      front-runner copying the provider's transaction, gains nothing. No provider (no such lease): all to the sink.
    function _slashFault(Fault calldata fault, bytes32 faultDigest, address attestor, address provider, uint64 atMs)
        private
        returns (bytes32 id)
    {
        id = keccak256(abi.encode(faultDigest, attestor));
        if (_faultsDisputed[id]) revert AlreadyDisputed(id);
        _checkLineage(id);
        StakeView storage stake_ = _stakes[attestor];
        if (stake_.active == 0 && stake_.unbonding == 0) revert NothingAtStake(attestor);
        _faultsDisputed[id] = true;
        uint96 amount = _slash(id, attestor, provider == address(0) ? _params.sink : provider, _params.disputerShareBps);
        emit FaultDisputed(attestor, fault.leaseId, msg.sender, fault.observedAt, atMs, amount);
    }

    function _faultWindowFor(uint32 observedAt) private view returns (uint32) {
        // The windows in force during [observedAt - notice, now]: the newest back to the one in force at that time.
        uint256 since = observedAt > FAULT_WINDOW_RAISE_NOTICE ? observedAt - FAULT_WINDOW_RAISE_NOTICE : 0;
        uint256 count = _windows.length;
        uint32 smallest = type(uint32).max;
        for (uint256 i = count; i > 0; --i) {
            WindowSet storage set = _windows[i - 1];
            // Past the lookback, everything older counts at once (its floor): smaller, so never against an honest attestor.
            uint32 window = count - i < _WINDOW_LOOKBACK ? set.window : set.floor;
            if (window < smallest) smallest = window;
            if (set.from <= since || count - i >= _WINDOW_LOOKBACK) break;
        }
        // A fault whose notice span began before this contract existed was signed under the predecessor's windows too:
        // its history continues here, as if one contract (the constructor keeps the first window at most its last).
        if (address(_PREDECESSOR) != address(0) && since < _windows[0].from) {
            uint32 inherited = _PREDECESSOR.faultWindowFor(observedAt);
            if (inherited < smallest) smallest = inherited;
        }
        return smallest;
    }

    function _faultDigest(Fault calldata f) private view returns (bytes32) {
        return _hashTyped(keccak256(abi.encode(FAULT_TYPEHASH, f.leaseId, f.kind, f.observedAt)));
    }

    /// @dev The market's domain separator, from the current chain id (a fork does not replay signatures).
    function _hashTyped(bytes32 structHash) private view returns (bytes32) {
        bytes32 domain = keccak256(abi.encode(_DOMAIN_TYPEHASH, _NAME_HASH, _VERSION_HASH, block.chainid, _MARKET));
        return MessageHashUtils.toTypedDataHash(domain, structHash);
    }

    function _emitStake(address attestor) private {
        StakeView storage stake_ = _stakes[attestor];
        emit AttestorStakeChanged(attestor, stake_.active, stake_.unbonding, stake_.unlockAt);
    }

    function _setParams(Params memory p) private {
        if (p.minStake == 0) revert ParamOutOfRange("minStake", 0, 1, type(uint96).max);
        if (p.slashAmount == 0) revert ParamOutOfRange("slashAmount", 0, 1, type(uint96).max);
        if (p.disputeFee == 0) revert ParamOutOfRange("disputeFee", 0, 1, type(uint96).max);
        if (p.answerWindow < MIN_ANSWER_WINDOW || p.answerWindow > MAX_ANSWER_WINDOW) {
            revert ParamOutOfRange("answerWindow", p.answerWindow, MIN_ANSWER_WINDOW, MAX_ANSWER_WINDOW);
        }
        if (p.unbondingDelay < p.answerWindow || p.unbondingDelay > MAX_UNBONDING_DELAY) {
            revert ParamOutOfRange("unbondingDelay", p.unbondingDelay, p.answerWindow, MAX_UNBONDING_DELAY);
        }
        if (p.disputerShareBps > MAX_DISPUTER_SHARE_BPS) {
            revert ParamOutOfRange("disputerShareBps", p.disputerShareBps, 0, MAX_DISPUTER_SHARE_BPS);
        }
        if (p.sink == address(0)) revert ZeroSink();
        if (p.faultWindow < MIN_FAULT_WINDOW || p.faultWindow > MAX_FAULT_WINDOW) {
            revert ParamOutOfRange("faultWindow", p.faultWindow, MIN_FAULT_WINDOW, MAX_FAULT_WINDOW);
        }
        uint256 count = _windows.length;
        if (count == 0 || _params.faultWindow != p.faultWindow) {
            uint32 floor = count == 0 ? p.faultWindow : _windows[count - 1].floor;
            if (p.faultWindow < floor) floor = p.faultWindow;
            _windows.push(WindowSet({from: uint32(block.timestamp), window: p.faultWindow, floor: floor}));
        }
        _params = p;
        emit ParamsChanged(p);
    }

    /// @dev EIP-712 encoding of a string[]: keccak256 of the concatenated keccak256 of each string.
    function _hashStrings(string[] calldata values) private pure returns (bytes32) {
        bytes32[] memory hashes = new bytes32[](values.length);
        for (uint256 i = 0; i < values.length; ++i) {
            hashes[i] = keccak256(bytes(values[i]));
        }
        return keccak256(abi.encodePacked(hashes));
    }

    /// @dev The attestation's `gpus` (common/attest/commit.ts gpusHash): zero for no device, else keccak256 of the
    ///      UUIDs in ascending byte order joined by newlines. `order` proves the order without sorting on-chain.
    function _gpusHash(string[] calldata devices, uint16[] calldata order) private pure returns (bytes32) {
        if (devices.length == 0) return bytes32(0);
        if (order.length != devices.length || devices.length > 256) revert DeviceOrderInvalid(order.length);
        uint256 seen;
        bytes memory joined;
        for (uint256 i = 0; i < order.length; ++i) {
            uint256 index = order[i];
            if (index >= devices.length || (seen >> index) & 1 == 1) revert DeviceOrderInvalid(i);
            seen |= 1 << index;
            if (i > 0 && _lessThan(devices[index], devices[order[i - 1]])) revert DeviceOrderInvalid(i);
            joined = i == 0 ? bytes(devices[index]) : bytes.concat(joined, "\n", bytes(devices[index]));
        }
        return keccak256(joined);
    }

    /// @dev Byte-wise lexicographic a < b.
    function _lessThan(string calldata a, string calldata b) private pure returns (bool) {
        bytes calldata x = bytes(a);
        bytes calldata y = bytes(b);
        uint256 n = x.length < y.length ? x.length : y.length;
        for (uint256 i = 0; i < n; ++i) {
            if (x[i] != y[i]) return x[i] < y[i];
        }
        return x.length < y.length;
    }
}
