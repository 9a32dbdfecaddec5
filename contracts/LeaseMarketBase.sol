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
/// @dev Lease storage is three slots, all written once at open:
///        slot 0: renter (160) | start (32) | stopAt (32) | collateralBps (16) | endReason (8) | activated (8)
///        slot 1: provider (160) | price (96)
///        slot 2: deposit (96) | paid (96) | machineId (32) | units (16) | status (8) | interruptible (8)
///      `start` is the start deadline while Open and the start of metering once active (shrink moves it).
///      While a lease is Open or Active, deposit is a whole multiple of units x price, so its end
///      `start + deposit / (units x price)` is exact. Once it ends, `deposit` is the provider's final total
///      and the renter has been refunded the rest. The invariant kept by every function:
///      token.balanceOf(market) == sum over leases of (deposit - paid).
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
    uint256 internal constant BPS = 10_000;

    // Packed into exactly three slots (see the layout above); the rule miscounts the enums.
    // solhint-disable-next-line gas-struct-packing
    struct Lease {
        address renter;
        uint32 start;
        uint32 stopAt;
        uint16 collateralBps;
        EndReason endReason;
        bool activated;
        address provider;
        uint96 price;
        uint96 deposit;
        uint96 paid;
        uint32 machineId;
        uint16 units;
        LeaseStatus status;
        bool interruptible;
    }

    IERC20 internal immutable _TOKEN;
    IProviderRegistry internal immutable _REGISTRY;

    mapping(uint256 leaseId => Lease) internal _leases;
    uint256 internal _nextLeaseId;
    MarketParams internal _params;

    /// @notice Binds the market code to a registry and its token, under the EIP-712 domain "Suanli" version "1".
    /// @param registry_ The ProviderRegistry; the market settles in its token.
    constructor(address registry_) EIP712("Suanli", "1") {
        _REGISTRY = IProviderRegistry(registry_);
        _TOKEN = IERC20(IProviderRegistry(registry_).token());
    }

    /// @dev Ends an Open or Active lease: accrual stops at `stopAt`, the provider's total becomes `providerTotal`
    ///      (the caller has set `lease.paid` if it pays the provider now), units and collateral go back to the
    ///      registry less `credit` paid from the collateral to the renter. Returns the renter's refund, which
    ///      the caller transfers.
    function _finish(
        uint256 leaseId,
        Lease memory lease,
        EndReason reason,
        uint32 stopAt,
        uint96 providerTotal,
        uint96 credit,
        IProviderRegistry.Outcome outcome
    ) internal returns (uint96 refund) {
        uint96 collateral = _collateral(lease.deposit, lease.collateralBps);
        refund = lease.deposit - providerTotal;
        uint64 unitSeconds;
        if (lease.status == LeaseStatus.Active) {
            unitSeconds = uint64(uint256(lease.units) * (stopAt - lease.start));
            lease.status = providerTotal == lease.paid ? LeaseStatus.Settled : LeaseStatus.Ended;
        } else {
            lease.status = reason == EndReason.CoSigned ? LeaseStatus.Settled : LeaseStatus.Cancelled;
        }
        lease.deposit = providerTotal;
        lease.stopAt = stopAt;
        lease.endReason = reason;
        _leases[leaseId] = lease;
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
    }

    /// @dev Pays the provider `amount` of a lease, less the protocol fee to the treasury.
    function _payProvider(uint256 leaseId, address provider, uint96 amount) internal {
        if (amount == 0) return;
        MarketParams memory params_ = _params;
        uint96 fee = _fee(amount, params_.protocolFeeBps);
        emit LeaseClaimed(leaseId, provider, amount, fee);
        _TOKEN.safeTransfer(provider, amount - fee);
        if (fee != 0) _TOKEN.safeTransfer(params_.treasury, fee);
    }

    /// @dev units x price x (until - start); the callers keep `until` within [start, end], so it fits the deposit.
    function _accruedUntil(Lease memory lease, uint256 until) internal pure returns (uint96) {
        return uint96(_rate(lease.units, lease.price) * (until - lease.start));
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
