// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.34;

import {IAccessControl} from "@openzeppelin/contracts/access/IAccessControl.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {IERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/IERC20Permit.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {Address} from "@openzeppelin/contracts/utils/Address.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {ILeaseMarket} from "./interfaces/ILeaseMarket.sol";
import {IProviderRegistry} from "./interfaces/IProviderRegistry.sol";
import {LeaseMarketBase} from "./LeaseMarketBase.sol";

/// @title LeaseMarketExtension
/// @notice The LeaseMarket's less frequent lease paths (faults, termination, cancellation, co-signed
///         settlement, extension, shrinking, governance). The LeaseMarket runs this code by delegatecall on
///         its own storage, which keeps each contract under the 24 KiB code limit; the functions are
///         documented in ILeaseMarket. Called directly, every function reverts.
contract LeaseMarketExtension is LeaseMarketBase {
    using SafeERC20 for IERC20;
    using SafeCast for uint256;

    address private immutable _SELF;

    /// @notice Deploys the extension for the LeaseMarket of `registry_`.
    /// @param registry_ The ProviderRegistry the LeaseMarket uses.
    constructor(address registry_) LeaseMarketBase(registry_) {
        _SELF = address(this);
    }

    modifier onlyDelegated() {
        if (address(this) == _SELF) revert NotDelegated();
        _;
    }

    /// @notice The registry this extension was built for (the LeaseMarket checks it matches its own).
    /// @return The registry's address.
    function registry() external view returns (address) {
        return address(_REGISTRY);
    }

    /// @notice ILeaseMarket.openLeaseWithPermit: submits the caller's permit, then runs the LeaseMarket's own
    ///         openLease (by delegatecall, so the caller stays msg.sender and openLease's guard applies).
    /// @param offer The provider's offer.
    /// @param signature The provider's signature of `offer`.
    /// @param terms The lease terms.
    /// @param permit The caller's EIP-2612 permit for the market.
    /// @return leaseId The new lease.
    function openLeaseWithPermit(
        Offer calldata offer,
        bytes calldata signature,
        LeaseTerms calldata terms,
        Permit calldata permit
    ) external onlyDelegated returns (uint256 leaseId) {
        // Ignoring a failed permit is deliberate: anyone who saw it in the mempool may have submitted it
        // first; the allowance is then already in place and the deposit pull still succeeds.
        try IERC20Permit(address(_TOKEN)).permit(
            msg.sender, address(this), permit.value, permit.deadline, permit.v, permit.r, permit.s
        ) {} catch {}
        bytes memory result =
            Address.functionDelegateCall(address(this), abi.encodeCall(ILeaseMarket.openLease, (offer, signature, terms)));
        return abi.decode(result, (uint256));
    }

    /// @notice ILeaseMarket.submitFault.
    /// @param fault The fault.
    /// @param signatures Attestor signatures, ordered by strictly increasing signer.
    function submitFault(Fault calldata fault, bytes[] calldata signatures) external onlyDelegated nonReentrant {
        uint256 leaseId = fault.leaseId;
        Lease memory lease = _leases[leaseId];
        if (lease.status != LeaseStatus.Active) revert InvalidLeaseStatus(leaseId, lease.status);
        if (fault.kind == 0) revert InvalidFaultKind(fault.kind);
        uint256 end = _endOf(lease);
        // A fault must fall inside the paid-for service: after activation, before the end, not in the future.
        uint256 latest = _min(block.timestamp, end - 1);
        uint32 observedAt = fault.observedAt;
        if (observedAt < lease.start || observedAt > latest) {
            revert FaultObservedOutOfRange(observedAt, lease.start, latest);
        }
        _checkQuorum(keccak256(abi.encode(FAULT_TYPEHASH, fault)), signatures);

        uint96 accruedAtFault = _accruedUntil(lease, observedAt);
        // Whatever the provider claimed after observedAt stays paid but comes back to the renter from collateral.
        uint96 total = lease.paid > accruedAtFault ? lease.paid : accruedAtFault;
        uint256 collateral = _collateral(lease.deposit, lease.collateralBps);
        uint256 credit = collateral * (end - observedAt) / (end - lease.start);
        uint256 minCredit = collateral * _params.faultMinCreditBps / BPS;
        if (credit < minCredit) credit = minCredit;
        credit = _min(credit + (total - accruedAtFault), collateral);
        uint96 refund = _finish(
            leaseId, lease, EndReason.Faulted, observedAt, total, uint96(credit), IProviderRegistry.Outcome.Faulted
        );
        emit FaultSubmitted(leaseId, fault.kind, observedAt, uint96(credit));
        if (refund != 0) _TOKEN.safeTransfer(lease.renter, refund);
    }

    /// @notice ILeaseMarket.terminate.
    /// @param leaseId The lease.
    function terminate(uint256 leaseId) external onlyDelegated nonReentrant {
        Lease memory lease = _leases[leaseId];
        if (msg.sender != lease.provider) revert NotProvider(leaseId, msg.sender);
        uint256 collateral = _collateral(lease.deposit, lease.collateralBps);
        uint96 refund;
        uint96 amount;
        if (lease.status == LeaseStatus.Open) {
            // Same price as missing the start deadline, so a provider gains nothing by waiting it out.
            uint96 penalty = uint96(collateral * _params.startPenaltyBps / BPS);
            refund = _finish(
                leaseId, lease, EndReason.Terminated, uint32(block.timestamp), 0, penalty, IProviderRegistry.Outcome.Faulted
            );
        } else if (lease.status == LeaseStatus.Active) {
            uint256 end = _endOf(lease);
            if (block.timestamp >= end) revert LeaseExpired(leaseId, uint32(end));
            uint96 total = _accruedUntil(lease, block.timestamp);
            uint96 penalty = uint96(collateral * (end - block.timestamp) / (end - lease.start));
            amount = total - lease.paid;
            lease.paid = total;
            refund = _finish(
                leaseId, lease, EndReason.Terminated, uint32(block.timestamp), total, penalty, IProviderRegistry.Outcome.Faulted
            );
        } else {
            revert InvalidLeaseStatus(leaseId, lease.status);
        }
        _payProvider(leaseId, lease.provider, amount);
        if (refund != 0) _TOKEN.safeTransfer(lease.renter, refund);
    }

    /// @notice ILeaseMarket.cancel.
    /// @param leaseId The lease.
    function cancel(uint256 leaseId) external onlyDelegated nonReentrant {
        Lease memory lease = _leases[leaseId];
        if (lease.status != LeaseStatus.Open) revert InvalidLeaseStatus(leaseId, lease.status);
        if (block.timestamp <= lease.start) revert StartDeadlineNotPassed(leaseId, lease.start);
        uint96 penalty = uint96(_collateral(lease.deposit, lease.collateralBps) * _params.startPenaltyBps / BPS);
        uint96 refund = _finish(
            leaseId, lease, EndReason.MissedStart, uint32(block.timestamp), 0, penalty, IProviderRegistry.Outcome.Faulted
        );
        _TOKEN.safeTransfer(lease.renter, refund);
    }

    /// @notice ILeaseMarket.settle.
    /// @param settlement The settlement.
    /// @param renterSignature The renter's signature.
    /// @param providerSignature The provider's signature.
    function settle(Settlement calldata settlement, bytes calldata renterSignature, bytes calldata providerSignature)
        external
        onlyDelegated
        nonReentrant
    {
        uint256 leaseId = settlement.leaseId;
        Lease memory lease = _leases[leaseId];
        LeaseStatus status = lease.status;
        if (status != LeaseStatus.Open && status != LeaseStatus.Active && status != LeaseStatus.Ended) {
            revert InvalidLeaseStatus(leaseId, status);
        }
        if (block.timestamp > settlement.deadline) revert SettlementExpired(settlement.deadline, block.timestamp);
        uint96 total = settlement.providerAmount;
        if (total < lease.paid || total > lease.deposit) {
            revert SettlementAmountOutOfRange(total, lease.paid, lease.deposit);
        }
        bytes32 digest = _hashTypedDataV4(keccak256(abi.encode(SETTLEMENT_TYPEHASH, settlement)));
        _requireSigner(digest, renterSignature, lease.renter);
        _requireSigner(digest, providerSignature, lease.provider);

        uint96 amount = total - lease.paid;
        uint96 refund;
        lease.paid = total;
        if (status == LeaseStatus.Ended) {
            refund = lease.deposit - total;
            lease.deposit = total;
            lease.status = LeaseStatus.Settled;
            _leases[leaseId] = lease;
        } else {
            uint256 stop = status == LeaseStatus.Active ? _min(block.timestamp, _endOf(lease)) : block.timestamp;
            refund = _finish(leaseId, lease, EndReason.CoSigned, uint32(stop), total, 0, IProviderRegistry.Outcome.Completed);
        }
        emit LeaseSettled(leaseId, total, refund);
        _payProvider(leaseId, lease.provider, amount);
        if (refund != 0) _TOKEN.safeTransfer(lease.renter, refund);
    }

    /// @notice ILeaseMarket.extend.
    /// @param leaseId The lease.
    /// @param extraSeconds Seconds to add.
    /// @param offer The consenting offer.
    /// @param signature The provider's signature of `offer`.
    function extend(uint256 leaseId, uint32 extraSeconds, Offer calldata offer, bytes calldata signature)
        external
        onlyDelegated
        nonReentrant
    {
        Lease memory lease = _leases[leaseId];
        if (msg.sender != lease.renter) revert NotRenter(leaseId, msg.sender);
        uint256 rate = _rate(lease.units, lease.price);
        // The end before the extension; while Open, the latest it can be (activation at the start deadline).
        uint256 end = _endOf(lease);
        if (lease.status == LeaseStatus.Active) {
            if (block.timestamp >= end) revert LeaseExpired(leaseId, uint32(end));
        } else if (lease.status != LeaseStatus.Open) {
            revert InvalidLeaseStatus(leaseId, lease.status);
        }
        if (extraSeconds == 0) revert ZeroExtension();
        uint32 newEnd = (end + extraSeconds).toUint32();
        _verifyOffer(offer, signature);
        if (offer.provider != lease.provider || offer.machineId != lease.machineId) {
            revert OfferForOtherMachine(leaseId, offer.provider, offer.machineId);
        }
        uint96 offerPrice = lease.interruptible ? offer.minBidPerUnitSecond : offer.pricePerUnitSecond;
        if (lease.interruptible && offerPrice == 0) revert InterruptibleNotOffered(offer.machineId);
        if (offerPrice > lease.price) revert ExtensionPriceTooHigh(offerPrice, lease.price);
        uint256 total = lease.deposit / rate + extraSeconds;
        if (total < offer.minDuration || total > offer.maxDuration) {
            revert DurationOutOfRange(total.toUint32(), offer.minDuration, offer.maxDuration);
        }

        uint96 extraDeposit = (rate * extraSeconds).toUint96();
        uint96 oldCollateral = _collateral(lease.deposit, lease.collateralBps);
        uint96 newDeposit = (uint256(lease.deposit) + extraDeposit).toUint96();
        _leases[leaseId].deposit = newDeposit;
        _REGISTRY.lockMore(
            lease.provider,
            _collateral(newDeposit, lease.collateralBps) - oldCollateral,
            offer.nonce,
            offer.renter != address(0)
        );
        emit LeaseExtended(leaseId, extraSeconds, extraDeposit, lease.status == LeaseStatus.Active ? newEnd : 0);
        _TOKEN.safeTransferFrom(msg.sender, address(this), extraDeposit);
    }

    /// @notice ILeaseMarket.shrink.
    /// @param leaseId The lease.
    /// @param newUnits Units to keep.
    function shrink(uint256 leaseId, uint16 newUnits) external onlyDelegated nonReentrant {
        Lease memory lease = _leases[leaseId];
        if (msg.sender != lease.renter) revert NotRenter(leaseId, msg.sender);
        if (newUnits == 0 || newUnits >= lease.units) revert InvalidShrink(newUnits, lease.units);
        uint96 oldCollateral = _collateral(lease.deposit, lease.collateralBps);
        uint96 amount;
        uint96 newDeposit;
        uint64 unitSeconds;
        uint96 refund;
        if (lease.status == LeaseStatus.Active) {
            uint256 end = _endOf(lease);
            if (block.timestamp >= end) revert LeaseExpired(leaseId, uint32(end));
            uint96 accrued_ = _accruedUntil(lease, block.timestamp);
            amount = accrued_ - lease.paid;
            unitSeconds = uint64(uint256(lease.units) * (block.timestamp - lease.start));
            // Metering restarts now for the kept units: what accrued is paid out, so paid starts at zero.
            newDeposit = uint96(uint256(newUnits) * lease.price * (end - block.timestamp));
            refund = lease.deposit - accrued_ - newDeposit;
            lease.start = uint32(block.timestamp);
            lease.paid = 0;
        } else if (lease.status == LeaseStatus.Open) {
            newDeposit = uint96(uint256(newUnits) * lease.price * (lease.deposit / _rate(lease.units, lease.price)));
            refund = lease.deposit - newDeposit;
        } else {
            revert InvalidLeaseStatus(leaseId, lease.status);
        }
        uint16 released = lease.units - newUnits;
        lease.units = newUnits;
        lease.deposit = newDeposit;
        _leases[leaseId] = lease;
        _REGISTRY.unlockPart(
            lease.provider,
            lease.machineId,
            released,
            lease.interruptible,
            oldCollateral - _collateral(newDeposit, lease.collateralBps),
            unitSeconds
        );
        emit LeaseShrunk(leaseId, newUnits, refund);
        _payProvider(leaseId, lease.provider, amount);
        if (refund != 0) _TOKEN.safeTransfer(lease.renter, refund);
    }

    /// @notice ILeaseMarket.setParams.
    /// @param params_ The new parameters.
    function setParams(MarketParams calldata params_) external onlyDelegated {
        if (!IAccessControl(address(_REGISTRY)).hasRole(bytes32(0), msg.sender)) revert NotGovernance(msg.sender);
        _setParams(params_);
    }

    /// @dev Requires at least faultQuorum signatures, all by distinct attestors in strictly increasing order.
    function _checkQuorum(bytes32 structHash, bytes[] calldata signatures) private view {
        uint256 count = signatures.length;
        if (count > MAX_FAULT_SIGNATURES) revert TooManySignatures(count, MAX_FAULT_SIGNATURES);
        uint256 quorum = _REGISTRY.faultQuorum();
        if (count < quorum) revert FaultQuorumNotMet(count, quorum);
        bytes32 digest = _hashTypedDataV4(structHash);
        address previous;
        for (uint256 i; i < count; ++i) {
            (address signer, ECDSA.RecoverError error_,) = ECDSA.tryRecoverCalldata(digest, signatures[i]);
            if (error_ != ECDSA.RecoverError.NoError || !_REGISTRY.isAttestor(signer)) revert NotAttestor(signer);
            if (signer == previous) revert DuplicateSigner(signer);
            if (signer < previous) revert SignersNotAscending(previous, signer);
            previous = signer;
        }
    }
}
