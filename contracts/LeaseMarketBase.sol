// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.34;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {ReentrancyGuardTransient} from "@openzeppelin/contracts/utils/ReentrancyGuardTransient.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {ILeaseMarketTypes} from "./interfaces/ILeaseMarketTypes.sol";
import {IProviderRegistry} from "./interfaces/IProviderRegistry.sol";

/// @title LeaseMarketBase
/// @notice Storage and lease accounting shared by LeaseMarket and LeaseMarketExtension. The market runs the
///         extension's code by delegatecall on its own storage, so both inherit exactly this layout and
///         neither declares state of its own.
/// @dev Lease storage is three slots, all written once at open, each written as one word:
///        slot 0: renter (160) | stopAt (32) | machineId (32) | collateralBps (16) | endReason (8) | interruptible (8)
///        slot 1: provider (160) | price (96)
///        slot 2: deposit (96) | paid (96) | start (32) | units (16) | status (8) | flags (8)
///      Slot 2 holds everything activate and claim read or write besides the provider and price (slot 1), so
///      activating or claiming a running lease never touches slot 0; an end writes slots 0 and 2.
///      `start` is the start deadline while Open and the start of metering once active (shrink moves it).
///      `stopAt` is when accrual stopped once the lease ended; while it runs it is the time of its latest
///      extension (zero: never extended), and `_depositBefore` holds the deposit that faults and penalties
///      about earlier times are computed on. `flags`: FLAG_ACTIVATED (start is the activation time),
///      FLAG_PREEMPTOR (the lease preempted another, so its renter owes at least the notice period),
///      FLAG_COMMITTED (a reserved-term lease: its renter owes at least `_commitment` seconds once active),
///      FLAG_HELD (a completion's hold, or an expiry's (reason Expired, stopAt the end): collateral and the pay from
///      paid up to the total accrued at stopAt held until stopAt + W; the rest of the deposit was refunded).
///      While a lease is Open or Active, deposit is a whole multiple of units x price, so its end
///      `start + deposit / (units x price)` is exact. Once it ends, `deposit` is the provider's final total
///      and the renter has been refunded the rest. The invariant kept by every function:
///      token.balanceOf(market) == sum over leases not held (FLAG_HELD) of (deposit - paid) + sum over held leases of
///      (units x price x (stopAt - start) - paid) + sum over accounts of owed.
abstract contract LeaseMarketBase is ILeaseMarketTypes, EIP712, ReentrancyGuardTransient {
    using SafeERC20 for IERC20;
    using SafeCast for uint256;

    /// @notice EIP-712 type hash of Offer (common/eip712.ts suanliTypes.Offer).
    bytes32 public constant OFFER_TYPEHASH = keccak256(
        "Offer(address provider,uint32 machineId,bytes32 model,uint96 pricePerUnitSecond,uint96 minBidPerUnitSecond,"
        "uint32 minDuration,uint32 maxDuration,uint16 collateralBps,uint32 startWindow,uint64 nonce,uint32 expiry,"
        "address renter)"
    );
    /// @notice EIP-712 type hash of Fault.
    bytes32 public constant FAULT_TYPEHASH = keccak256("Fault(uint256 leaseId,uint8 kind,uint32 observedAt)");
    /// @notice EIP-712 type hash of Settlement.
    bytes32 public constant SETTLEMENT_TYPEHASH =
        keccak256("Settlement(uint256 leaseId,uint96 providerAmount,uint32 deadline)");
    /// @notice Highest protocol fee governance may set (10 %).
    uint16 public constant MAX_PROTOCOL_FEE_BPS = 1000;
    /// @notice Longest preemption notice governance may set.
    uint32 public constant MAX_PREEMPTION_NOTICE = 1 days;
    /// @notice Most leases per claimMany.
    uint256 public constant MAX_BATCH = 64;
    /// @notice Most leases listed for preemption in one openLease.
    uint256 public constant MAX_PREEMPT = 16;
    /// @notice Most signatures per fault.
    uint256 public constant MAX_FAULT_SIGNATURES = 32;
    /// @notice A fault must be submitted within this many seconds of its observedAt; an extension counts for
    ///         a termination penalty once it is this old.
    uint32 public constant FAULT_SUBMISSION_WINDOW = 10 minutes;
    /// @notice Shortest start window an offer may give its provider to activate a lease.
    uint32 public constant MIN_START_WINDOW = 10;
    uint256 internal constant BPS = 10_000;
    /// @dev The highest fault kind: 1 unresponsive, 2 capacity (common/eip712.ts FaultKind). Every kind is one that
    ///      AttestorStaking can prove false with its signer's own receipt; a new kind needs its rule there first.
    uint8 internal constant MAX_FAULT_KIND = 2;
    uint8 internal constant FLAG_ACTIVATED = 1;
    uint8 internal constant FLAG_PREEMPTOR = 2;
    /// @dev The lease's offer had a minDuration of at least MIN_COMMITMENT: its renter owes that much (_commitment).
    uint8 internal constant FLAG_COMMITTED = 4;
    /// @dev An offer whose minDuration is at least this long is a reserved-term commitment: a renter who closes its
    ///      lease earlier pays units x price x minDuration (the price was discounted for that commitment). Shorter
    ///      minimums are a provider's setup floor and bind nothing (no storage for them on the hot path). Internal:
    ///      a public getter would lengthen the market's dispatch, and every lease call with it.
    uint32 internal constant MIN_COMMITMENT = 1 hours;
    /// @dev A completed lease (Settled, reason Completed) whose collateral stays locked until stopAt +
    ///      FAULT_SUBMISSION_WINDOW, so a fault observed before the completion still lands (issue #34, finding 1); also
    ///      an Active lease ended after its end and before end + W by a claim, close or preempting open (reason Expired,
    ///      stopAt = its end), so a fault observed in its last window still lands.
    ///      `deposit` is still the lease's deposit (the renter was refunded all but units x price x (stopAt - start),
    ///      the provider's total) and `paid` what the provider was paid of it (up to stopAt - W); the release pays the
    ///      rest and sets deposit = paid = the total.
    uint8 internal constant FLAG_HELD = 8;

    // Packed into exactly three slots (see the layout above); the rule miscounts the enums. The order is the
    // storage layout _storeWord0/1/2 pack by hand (and activate and claim read by hand).
    // solhint-disable-next-line gas-struct-packing
    struct Lease {
        // slot 0: written at open and at the end (cold while the lease runs)
        address renter;
        uint32 stopAt;
        uint32 machineId;
        uint16 collateralBps;
        EndReason endReason;
        bool interruptible;
        // slot 1: written once at open
        address provider;
        uint96 price;
        // slot 2: what activate, claim and every end change
        uint96 deposit;
        uint96 paid;
        uint32 start;
        uint16 units;
        LeaseStatus status;
        uint8 flags;
    }

    IERC20 internal immutable _TOKEN;
    IProviderRegistry internal immutable _REGISTRY;

    mapping(uint256 leaseId => Lease) internal _leases;
    uint256 internal _nextLeaseId;
    MarketParams internal _params;
    /// @dev Tokens whose transfer failed (a blocklisted or otherwise refusing receiver), pulled with withdraw.
    mapping(address account => uint256) internal _owed;
    /// @dev While a lease runs and was extended (stopAt = the latest extension): the deposit before the earliest
    ///      extension whose earlier faults may still be submitted. Faults and penalties about earlier times use it.
    mapping(uint256 leaseId => uint96) internal _depositBefore;
    /// @dev A committed lease's (FLAG_COMMITTED) offer minDuration: seconds from activation its renter pays for.
    mapping(uint256 leaseId => uint32) internal _commitment;

    /// @notice Binds the market code to a registry and its token, under the EIP-712 domain "Suanli" version "1".
    /// @param registry_ The ProviderRegistry; the market settles in its token.
    constructor(address registry_) EIP712("Suanli", "1") {
        _REGISTRY = IProviderRegistry(registry_);
        _TOKEN = IERC20(IProviderRegistry(registry_).token());
    }

    /// @dev Ends an Open or Active lease: accrual stops at `stopAt`, the provider's total becomes `providerTotal`
    ///      (the caller has set `lease.paid` if it pays the provider now), units and collateral go back to the
    ///      registry less `credit`, which the registry sends here for the renter. Returns what the renter gets
    ///      (refund plus credit), which the caller pays with _pay.
    function _finish(
        uint256 leaseId,
        Lease memory lease,
        EndReason reason,
        uint32 stopAt,
        uint96 providerTotal,
        uint96 credit,
        IProviderRegistry.Outcome outcome
    ) internal returns (uint256 toRenter) {
        uint96 collateral = _collateral(lease.deposit, lease.collateralBps);
        uint96 refund = lease.deposit - providerTotal;
        uint64 unitSeconds;
        if (lease.status == LeaseStatus.Active) {
            // Reputation counts paid unit-seconds: never more than were metered, nor than the provider's total buys.
            unitSeconds = uint64(_min(uint256(lease.units) * (stopAt - lease.start), providerTotal / lease.price));
            lease.status = providerTotal == lease.paid ? LeaseStatus.Settled : LeaseStatus.Ended;
        } else if (reason == EndReason.CoSigned || providerTotal == 0) {
            lease.status = reason == EndReason.CoSigned ? LeaseStatus.Settled : LeaseStatus.Cancelled;
        } else {
            // A preempting lease closed before activation: its renter owes the notice period, claimed later.
            lease.status = LeaseStatus.Ended;
        }
        lease.deposit = providerTotal;
        lease.stopAt = stopAt;
        lease.endReason = reason;
        _storeEnd(leaseId, lease);
        _REGISTRY.release(
            lease.provider,
            lease.machineId,
            lease.units,
            lease.interruptible,
            collateral,
            credit,
            lease.renter,
            unitSeconds,
            outcome
        );
        emit LeaseEnded(leaseId, reason, stopAt, providerTotal, refund, credit);
        toRenter = uint256(refund) + credit;
    }

    // ---------------------------------------------------------------- lease storage, one word per slot

    // The compiler writes a struct field by field (a read and a write per field); these write each slot once.
    // solhint-disable no-inline-assembly

    /// @dev The first storage slot of lease `leaseId` (slots +1 and +2 follow).
    function _leaseSlot(uint256 leaseId) internal pure returns (uint256 slot) {
        // Solidity's mapping slot: keccak256(key . mapping's slot).
        assembly ("memory-safe") {
            mstore(0, leaseId)
            mstore(0x20, _leases.slot)
            slot := keccak256(0, 0x40)
        }
    }

    /// @dev Writes slot 0 of a lease from memory as one word.
    function _storeWord0(uint256 slot, Lease memory lease) internal {
        uint256 word = uint256(uint160(lease.renter)) | (uint256(lease.stopAt) << 160)
            | (uint256(lease.machineId) << 192) | (uint256(lease.collateralBps) << 224)
            | (uint256(uint8(lease.endReason)) << 240) | (lease.interruptible ? uint256(1) << 248 : 0);
        assembly ("memory-safe") {
            sstore(slot, word)
        }
    }

    /// @dev Writes slot 1 of a lease from memory as one word.
    function _storeWord1(uint256 slot, Lease memory lease) internal {
        uint256 word = uint256(uint160(lease.provider)) | (uint256(lease.price) << 160);
        assembly ("memory-safe") {
            sstore(add(slot, 1), word)
        }
    }

    /// @dev Writes slot 2 of a lease from memory as one word.
    function _storeWord2(uint256 slot, Lease memory lease) internal {
        uint256 word = uint256(lease.deposit) | (uint256(lease.paid) << 96) | (uint256(lease.start) << 192)
            | (uint256(lease.units) << 224) | (uint256(uint8(lease.status)) << 240) | (uint256(lease.flags) << 248);
        assembly ("memory-safe") {
            sstore(add(slot, 2), word)
        }
    }

    /// @dev Writes what changes after open (slots 0 and 2); slot 1 (provider, price) never changes.
    function _storeEnd(uint256 leaseId, Lease memory lease) internal {
        uint256 slot = _leaseSlot(leaseId);
        _storeWord0(slot, lease);
        _storeWord2(slot, lease);
    }

    /// @dev Writes slot 2 only (deposit, paid, start, units, status, flags).
    function _storeState(uint256 leaseId, Lease memory lease) internal {
        _storeWord2(_leaseSlot(leaseId), lease);
    }
    // solhint-enable no-inline-assembly

    /// @dev Pays the provider of a lease what it was paid beyond `paidBefore` up to `paidAfter`, less the protocol
    ///      fee. The fee is taken on the lease's cumulative payments (fee(after) - fee(before)), so however the
    ///      payments are split the treasury receives fee(total).
    function _payProvider(uint256 leaseId, address provider, uint96 paidBefore, uint96 paidAfter) internal {
        if (paidAfter == paidBefore) return;
        uint96 amount = paidAfter - paidBefore;
        uint16 feeBps = _params.protocolFeeBps;
        if (feeBps == 0) {
            emit LeaseClaimed(leaseId, provider, amount, 0);
            _pay(provider, amount);
            return;
        }
        uint96 fee = _fee(paidAfter, feeBps) - _fee(paidBefore, feeBps);
        emit LeaseClaimed(leaseId, provider, amount, fee);
        _pay(provider, amount - fee);
        _pay(_params.treasury, fee);
    }

    /// @dev Sends `amount` to `to`; if the token refuses (a blocklisted receiver, say), records it as owed to `to`
    ///      instead, so no receiver can make another party's transaction revert. `to` pulls it with withdraw.
    function _pay(address to, uint256 amount) internal {
        if (amount == 0) return;
        if (!_TOKEN.trySafeTransfer(to, amount)) {
            _owed[to] += amount;
            emit PaymentDeferred(to, amount);
        }
    }

    /// @dev Pulls `amount` from `from` and checks the market received all of it (a fee-on-transfer token
    ///      would leave the escrow short of what it owes).
    function _pull(address from, uint256 amount) internal {
        uint256 before = _TOKEN.balanceOf(address(this));
        _TOKEN.safeTransferFrom(from, address(this), amount);
        uint256 received = _TOKEN.balanceOf(address(this)) - before;
        if (received != amount) revert TokenTransferShortfall(amount, received);
    }

    /// @dev units x price x (until - start); the callers keep `until` within [start, end], so it fits the deposit.
    function _accruedUntil(Lease memory lease, uint256 until) internal pure returns (uint96) {
        return uint96(_rate(lease.units, lease.price) * (until - lease.start));
    }

    /// @dev What the provider may be paid of a lease that stops (or is claimed) at `at`: what accrued until
    ///      `at` - FAULT_SUBMISSION_WINDOW (zero before that). The last window's pay stays in escrow, so a fault, which
    ///      lands within the window after its observedAt, finds everything the provider would be paid after observedAt
    ///      still there and returns it to the renter in full, whatever the collateral (issue #34, overpaid-above-collateral).
    function _paidUntil(Lease memory lease, uint256 at) internal pure returns (uint96) {
        if (at <= uint256(lease.start) + FAULT_SUBMISSION_WINDOW) return 0;
        return _accruedUntil(lease, at - FAULT_SUBMISSION_WINDOW);
    }

    /// @dev When an Active lease's deposit runs out (for an Open lease: its latest possible end).
    function _endOf(Lease memory lease) internal pure returns (uint256) {
        return lease.start + lease.deposit / _rate(lease.units, lease.price);
    }

    function _verifyOffer(Offer calldata offer, bytes calldata signature) internal view {
        if (block.timestamp > offer.expiry) revert OfferExpired(offer.expiry, block.timestamp);
        if (offer.renter != address(0) && offer.renter != msg.sender) revert OfferNotForRenter(offer.renter, msg.sender);
        // Every Offer field is a static type, so abi.encode(offer) is the EIP-712 encodeData of the struct.
        _requireSigner(_hashTypedDataV4(keccak256(abi.encode(OFFER_TYPEHASH, offer))), signature, offer.provider);
    }

    function _requireSigner(bytes32 digest, bytes calldata signature, address expected) internal pure {
        (address recovered, ECDSA.RecoverError error_,) = ECDSA.tryRecoverCalldata(digest, signature);
        if (error_ != ECDSA.RecoverError.NoError || recovered != expected) revert InvalidSignature(expected, recovered);
    }

    function _rate(uint16 units, uint96 price) internal pure returns (uint256) {
        return uint256(units) * price;
    }

    function _collateral(uint96 deposit, uint16 collateralBps) internal pure returns (uint96) {
        return (uint256(deposit) * collateralBps / BPS).toUint96();
    }

    function _fee(uint96 amount, uint16 feeBps) internal pure returns (uint96) {
        // Cannot overflow: feeBps <= MAX_PROTOCOL_FEE_BPS, so the fee is at most a tenth of a uint96 amount.
        return uint96(uint256(amount) * feeBps / BPS);
    }

    function _min(uint256 a, uint256 b) internal pure returns (uint256) {
        return a < b ? a : b;
    }

    function _setParams(MarketParams memory params_) internal {
        if (params_.protocolFeeBps > MAX_PROTOCOL_FEE_BPS) {
            revert ParamOutOfRange("protocolFeeBps", params_.protocolFeeBps, MAX_PROTOCOL_FEE_BPS);
        }
        if (params_.startPenaltyBps > BPS) revert ParamOutOfRange("startPenaltyBps", params_.startPenaltyBps, BPS);
        if (params_.faultMinCreditBps > BPS) {
            revert ParamOutOfRange("faultMinCreditBps", params_.faultMinCreditBps, BPS);
        }
        if (params_.preemptionNotice > MAX_PREEMPTION_NOTICE) {
            revert ParamOutOfRange("preemptionNotice", params_.preemptionNotice, MAX_PREEMPTION_NOTICE);
        }
        if (params_.protocolFeeBps != 0 && params_.treasury == address(0)) revert ZeroTreasury();
        _params = params_;
        emit MarketParamsChanged(params_);
    }
}
