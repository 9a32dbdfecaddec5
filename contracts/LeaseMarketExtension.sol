// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.34;

import {IAccessControl} from "@openzeppelin/contracts/access/IAccessControl.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
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

    /// @notice ILeaseMarket.submitFault.
    /// @param fault The fault.
    /// @param signatures Attestor signatures, ordered by strictly increasing signer.
    function submitFault(Fault calldata fault, bytes[] calldata signatures) external onlyDelegated nonReentrant {
        uint256 leaseId = fault.leaseId;
        Lease memory lease = _leases[leaseId];
        // A preempted lease keeps running until stopAt (its notice period); a fault can stop it earlier.
        bool inNotice = lease.status == LeaseStatus.Ended && lease.endReason == EndReason.Preempted
            && block.timestamp < lease.stopAt;
        // A completion holds the collateral: a fault observed before it still lands (issue #34, finding 1).
        bool held = (lease.flags & FLAG_HELD) != 0;
        if (lease.status != LeaseStatus.Active && !inNotice && !held) revert InvalidLeaseStatus(leaseId, lease.status);
        // Only kinds a receipt can contradict (issue #34, finding 3): an undefined kind would land undisputable.
        if (fault.kind == 0 || fault.kind > MAX_FAULT_KIND) revert InvalidFaultKind(fault.kind);
        uint256 end = inNotice || held ? lease.stopAt : _endOf(lease);
        // A fault must fall inside the paid-for service: after activation, before the end, not in the future.
        uint256 latest = _min(block.timestamp, end - 1);
        uint32 observedAt = fault.observedAt;
        if (observedAt < lease.start || observedAt > latest) {
            revert FaultObservedOutOfRange(observedAt, lease.start, latest);
        }
        // A fault held back would end the lease long after the provider kept serving it.
        uint256 deadline = uint256(observedAt) + FAULT_SUBMISSION_WINDOW;
        if (block.timestamp > deadline) revert FaultSubmissionClosed(observedAt, deadline);
        _checkQuorum(keccak256(abi.encode(FAULT_TYPEHASH, fault)), signatures);

        uint96 accruedAtFault = _accruedUntil(lease, observedAt);
        // Whatever the provider claimed after observedAt stays paid but comes back to the renter from collateral.
        uint96 total = lease.paid > accruedAtFault ? lease.paid : accruedAtFault;
        if (held) {
            _faultHeld(leaseId, lease, fault.kind, observedAt, accruedAtFault);
            return;
        }
        if (inNotice) {
            // The collateral was released at the preemption: accrual stops at observedAt, without credit.
            uint96 rest = lease.deposit - total;
            lease.deposit = total;
            lease.stopAt = observedAt;
            lease.endReason = EndReason.Faulted;
            lease.status = total == lease.paid ? LeaseStatus.Settled : LeaseStatus.Ended;
            _storeEnd(leaseId, lease);
            emit LeaseEnded(leaseId, EndReason.Faulted, observedAt, total, rest, 0);
            emit FaultSubmitted(leaseId, fault.kind, observedAt, 0);
            _pay(lease.renter, rest);
            return;
        }
        uint256 credit = _faultCredit(leaseId, lease, observedAt, end, total - accruedAtFault);
        uint256 toRenter = _finish(
            leaseId, lease, EndReason.Faulted, observedAt, total, uint96(credit), IProviderRegistry.Outcome.Faulted
        );
        emit FaultSubmitted(leaseId, fault.kind, observedAt, uint96(credit));
        _pay(lease.renter, toRenter);
    }

    /// @notice ILeaseMarket.terminate.
    /// @param leaseId The lease.
    function terminate(uint256 leaseId) external onlyDelegated nonReentrant {
        Lease memory lease = _leases[leaseId];
        if (msg.sender != lease.provider) revert NotProvider(leaseId, msg.sender);
        uint256 toRenter;
        uint96 paidBefore = lease.paid;
        if (lease.status == LeaseStatus.Open) {
            // Same price as missing the start deadline, so a provider gains nothing by waiting it out. An Open
            // lease cannot be extended, so this is the lease as opened.
            uint96 penalty =
                uint96(uint256(_collateral(lease.deposit, lease.collateralBps)) * _params.startPenaltyBps / BPS);
            toRenter = _finish(
                leaseId, lease, EndReason.Terminated, uint32(block.timestamp), 0, penalty, IProviderRegistry.Outcome.Faulted
            );
        } else if (lease.status == LeaseStatus.Active) {
            uint256 end = _endOf(lease);
            if (block.timestamp >= end) revert LeaseExpired(leaseId, uint32(end));
            uint96 total = _accruedUntil(lease, block.timestamp);
            // An extension younger than the window does not count: a renter cannot front-run a termination
            // with an extension to raise the penalty.
            uint96 termsDeposit = block.timestamp < uint256(lease.stopAt) + FAULT_SUBMISSION_WINDOW
                ? _depositBefore[leaseId]
                : lease.deposit;
            uint96 penalty = uint96(_proRata(lease, termsDeposit, block.timestamp));
            lease.paid = total;
            toRenter = _finish(
                leaseId, lease, EndReason.Terminated, uint32(block.timestamp), total, penalty, IProviderRegistry.Outcome.Faulted
            );
        } else {
            revert InvalidLeaseStatus(leaseId, lease.status);
        }
        _payProvider(leaseId, lease.provider, paidBefore, lease.paid);
        _pay(lease.renter, toRenter);
    }

    /// @notice ILeaseMarket.cancel.
    /// @param leaseId The lease.
    function cancel(uint256 leaseId) external onlyDelegated nonReentrant {
        Lease memory lease = _leases[leaseId];
        if (lease.status != LeaseStatus.Open) revert InvalidLeaseStatus(leaseId, lease.status);
        if (block.timestamp <= lease.start) revert StartDeadlineNotPassed(leaseId, lease.start);
        // On the lease as opened (an Open lease cannot be extended; a shrink only lowers it).
        uint96 penalty = uint96(_collateral(lease.deposit, lease.collateralBps) * _params.startPenaltyBps / BPS);
        uint256 toRenter = _finish(
            leaseId, lease, EndReason.MissedStart, uint32(block.timestamp), 0, penalty, IProviderRegistry.Outcome.Faulted
        );
        _pay(lease.renter, toRenter);
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
        bool held = (lease.flags & FLAG_HELD) != 0;
        if (status != LeaseStatus.Open && status != LeaseStatus.Active && status != LeaseStatus.Ended && !held) {
            revert InvalidLeaseStatus(leaseId, status);
        }
        if (block.timestamp > settlement.deadline) revert SettlementExpired(settlement.deadline, block.timestamp);
        uint96 total = settlement.providerAmount;
        // A held completion: its renter co-signs at most the provider's total (what accrued until the completion).
        uint96 most = held ? _accruedUntil(lease, lease.stopAt) : lease.deposit;
        if (total < lease.paid || total > most) revert SettlementAmountOutOfRange(total, lease.paid, most);
        bytes32 digest = _hashTypedDataV4(keccak256(abi.encode(SETTLEMENT_TYPEHASH, settlement)));
        _requireSigner(digest, renterSignature, lease.renter);
        _requireSigner(digest, providerSignature, lease.provider);

        uint96 paidBefore = lease.paid;
        uint256 refund;
        lease.paid = total;
        if (held) {
            // The renter co-signs a completion: its hold ends now and it counts as one; the held pay above the
            // co-signed total goes back to the renter.
            refund = most - total;
            _releaseHeld(leaseId, lease, IProviderRegistry.Outcome.Completed);
        } else if (status == LeaseStatus.Ended) {
            refund = lease.deposit - total;
            lease.deposit = total;
            lease.status = LeaseStatus.Settled;
            _storeState(leaseId, lease);
        } else {
            uint256 stop = status == LeaseStatus.Active ? _min(block.timestamp, _endOf(lease)) : block.timestamp;
            refund = _finish(leaseId, lease, EndReason.CoSigned, uint32(stop), total, 0, IProviderRegistry.Outcome.Completed);
        }
        emit LeaseSettled(leaseId, total, uint96(refund));
        _payProvider(leaseId, lease.provider, paidBefore, total);
        _pay(lease.renter, refund);
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
        // Only Active leases: extending an Open one would raise the start penalty its provider risks after the
        // fact (a renter can close an Open lease for a full refund and open a longer one instead).
        if (lease.status != LeaseStatus.Active) revert InvalidLeaseStatus(leaseId, lease.status);
        uint256 rate = _rate(lease.units, lease.price);
        uint256 end = _endOf(lease);
        if (block.timestamp >= end) revert LeaseExpired(leaseId, uint32(end));
        if (extraSeconds == 0) revert ZeroExtension();
        uint32 newEnd = (end + extraSeconds).toUint32();
        _requireConsent(leaseId, lease, offer, signature);
        uint256 total = lease.deposit / rate + extraSeconds;
        if (total < offer.minDuration || total > offer.maxDuration) {
            revert DurationOutOfRange(total.toUint32(), offer.minDuration, offer.maxDuration);
        }

        uint96 extraDeposit = (rate * extraSeconds).toUint96();
        uint96 oldCollateral = _collateral(lease.deposit, lease.collateralBps);
        uint96 newDeposit = (uint256(lease.deposit) + extraDeposit).toUint96();
        // Faults observed before now, and terminations within the window, use the deposit before the extension.
        // While a fault observed before the previous extension may still be submitted, keep the older (smaller)
        // deposit: never more than the lease was at any time a pending fault may name.
        if (block.timestamp >= uint256(lease.stopAt) + FAULT_SUBMISSION_WINDOW) _depositBefore[leaseId] = lease.deposit;
        lease.deposit = newDeposit;
        lease.stopAt = uint32(block.timestamp);
        _storeEnd(leaseId, lease);
        _REGISTRY.lockMore(
            lease.provider,
            _collateral(newDeposit, lease.collateralBps) - oldCollateral,
            offer.nonce,
            offer.renter != address(0)
        );
        emit LeaseExtended(leaseId, extraSeconds, extraDeposit, newEnd);
        _pull(msg.sender, extraDeposit);
    }

    /// @notice ILeaseMarket.shrink.
    /// @param leaseId The lease.
    /// @param newUnits Units to keep.
    function shrink(uint256 leaseId, uint16 newUnits) external onlyDelegated nonReentrant {
        Lease memory lease = _leases[leaseId];
        if (msg.sender != lease.renter) revert NotRenter(leaseId, msg.sender);
        if (newUnits == 0 || newUnits >= lease.units) revert InvalidShrink(newUnits, lease.units);
        if ((lease.flags & FLAG_PREEMPTOR) != 0) {
            _requireNoticePaid(leaseId, lease);
            lease.flags &= ~FLAG_PREEMPTOR;
        }
        if ((lease.flags & FLAG_COMMITTED) != 0 && lease.status == LeaseStatus.Active) {
            // A reserved-term lease keeps its units until its commitment is served (shrinking would escape it).
            uint256 servedFrom = uint256(lease.start) + _commitment[leaseId];
            if (block.timestamp < servedFrom) revert CommitmentUnserved(leaseId, servedFrom);
            lease.flags &= ~FLAG_COMMITTED;
        }
        uint96 oldCollateral = _collateral(lease.deposit, lease.collateralBps);
        uint96 paidBefore = lease.paid;
        uint96 accrued_;
        uint96 newDeposit;
        uint64 unitSeconds;
        uint96 refund;
        if (lease.status == LeaseStatus.Active) {
            uint256 end = _endOf(lease);
            if (block.timestamp >= end) revert LeaseExpired(leaseId, uint32(end));
            accrued_ = _accruedUntil(lease, block.timestamp);
            unitSeconds = uint64(uint256(lease.units) * (block.timestamp - lease.start));
            // Metering restarts now for the kept units: what accrued is paid out, so paid starts at zero.
            newDeposit = uint96(uint256(newUnits) * lease.price * (end - block.timestamp));
            refund = lease.deposit - accrued_ - newDeposit;
            if (block.timestamp < uint256(lease.stopAt) + FAULT_SUBMISSION_WINDOW) _restateDepositBefore(leaseId, lease, newUnits);
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
        _storeState(leaseId, lease);
        _REGISTRY.unlockPart(
            lease.provider,
            lease.machineId,
            released,
            lease.interruptible,
            oldCollateral - _collateral(newDeposit, lease.collateralBps),
            unitSeconds
        );
        emit LeaseShrunk(leaseId, newUnits, refund);
        _payProvider(leaseId, lease.provider, paidBefore, accrued_ > paidBefore ? accrued_ : paidBefore);
        _pay(lease.renter, refund);
    }

    /// @notice ILeaseMarket.claim, for a completed lease whose collateral is held (LeaseMarket.claim runs it inside its
    ///         reentrancy guard): after FAULT_SUBMISSION_WINDOW, the collateral goes back to the provider and the
    ///         provider is paid the rest of its total (its last window's pay). Reputation counts a completion only if
    ///         the lease ran to its end.
    /// @param leaseId The lease.
    function claim(uint256 leaseId) external onlyDelegated {
        Lease memory lease = _leases[leaseId];
        uint256 until = uint256(lease.stopAt) + FAULT_SUBMISSION_WINDOW;
        if (block.timestamp < until) revert CollateralHeld(leaseId, until);
        uint96 total = _accruedUntil(lease, lease.stopAt);
        IProviderRegistry.Outcome outcome =
            total == lease.deposit ? IProviderRegistry.Outcome.Completed : IProviderRegistry.Outcome.Neutral;
        uint96 paidBefore = lease.paid;
        lease.paid = total;
        _releaseHeld(leaseId, lease, outcome);
        _payProvider(leaseId, lease.provider, paidBefore, total);
    }

    /// @notice ILeaseMarket.setParams.
    /// @param params_ The new parameters.
    function setParams(MarketParams calldata params_) external onlyDelegated {
        if (!IAccessControl(address(_REGISTRY)).hasRole(bytes32(0), msg.sender)) revert NotGovernance(msg.sender);
        _setParams(params_);
    }

    /// @notice ILeaseMarket.withdraw.
    /// @param to The receiver.
    function withdraw(address to) external onlyDelegated nonReentrant {
        uint256 amount = _owed[msg.sender];
        if (amount == 0) revert NothingOwed(msg.sender);
        _owed[msg.sender] = 0;
        emit OwedWithdrawn(msg.sender, to, amount);
        _TOKEN.safeTransfer(to, amount);
    }

    /// @dev Ends a completion's hold: the collateral goes back to the provider, `deposit` becomes the provider's total
    ///      (`paid`, which the caller set and pays), reputation records `outcome` with the paid unit-seconds.
    function _releaseHeld(uint256 leaseId, Lease memory lease, IProviderRegistry.Outcome outcome) private {
        uint96 collateral = _collateral(lease.deposit, lease.collateralBps);
        lease.deposit = lease.paid;
        lease.flags &= ~FLAG_HELD;
        _storeState(leaseId, lease);
        // The units went back at the completion; the paid unit-seconds count now (units x metered seconds).
        _REGISTRY.release(
            lease.provider,
            lease.machineId,
            0,
            lease.interruptible,
            collateral,
            0,
            lease.renter,
            uint64(_min(uint256(lease.units) * (lease.stopAt - lease.start), lease.paid / lease.price)),
            outcome
        );
        emit CompletionReleased(leaseId, outcome == IProviderRegistry.Outcome.Completed);
    }

    /// @dev A fault observed at `observedAt`, before the completion of a held lease: the provider is paid what accrued
    ///      until then; its held pay after it goes back to the renter in full, with the SLA credit from the collateral
    ///      (the unused deposit was refunded at the completion). The completion paid at most until stopAt - W <=
    ///      observedAt, so nothing the provider was paid lies after observedAt. The credit is on the deposit before the
    ///      lease's latest extension, if any (the completion overwrote the extension's time; never more than the lease
    ///      was at observedAt).
    function _faultHeld(uint256 leaseId, Lease memory lease, uint8 kind, uint32 observedAt, uint96 accruedAtFault)
        private
    {
        uint96 collateral = _collateral(lease.deposit, lease.collateralBps);
        uint96 termsDeposit = _depositBefore[leaseId];
        if (termsDeposit == 0 || termsDeposit > lease.deposit) termsDeposit = lease.deposit;
        uint256 credit = _proRata(lease, termsDeposit, observedAt);
        uint256 minCredit = uint256(_collateral(termsDeposit, lease.collateralBps)) * _params.faultMinCreditBps / BPS;
        if (credit < minCredit) credit = minCredit;
        if (credit > collateral) credit = collateral;
        // paid <= accruedAtFault (above); the max only keeps a broken assumption from reverting the fault.
        uint96 paidBefore = lease.paid;
        uint96 total = paidBefore > accruedAtFault ? paidBefore : accruedAtFault;
        uint96 heldBack = _accruedUntil(lease, lease.stopAt) - total;
        lease.paid = total;
        lease.deposit = total;
        lease.endReason = EndReason.Faulted;
        lease.stopAt = observedAt;
        lease.flags &= ~FLAG_HELD;
        _storeEnd(leaseId, lease);
        _REGISTRY.release(
            lease.provider,
            lease.machineId,
            0,
            lease.interruptible,
            collateral,
            uint96(credit),
            lease.renter,
            uint64(accruedAtFault / lease.price),
            IProviderRegistry.Outcome.Faulted
        );
        emit LeaseEnded(leaseId, EndReason.Faulted, observedAt, lease.paid, heldBack, uint96(credit));
        emit FaultSubmitted(leaseId, kind, observedAt, uint96(credit));
        _payProvider(leaseId, lease.provider, paidBefore, total);
        _pay(lease.renter, uint256(heldBack) + credit);
    }

    /// @dev The SLA credit of a fault observed at `observedAt` on the lease as it was then (an extension made after
    ///      it does not raise the credit; stopAt is the latest extension's time while the lease runs), plus
    ///      `overpaid` (what the provider claimed after observedAt), capped at the collateral locked now.
    function _faultCredit(uint256 leaseId, Lease memory lease, uint32 observedAt, uint256 end, uint256 overpaid)
        private
        view
        returns (uint256 credit)
    {
        uint256 collateral = _collateral(lease.deposit, lease.collateralBps);
        uint256 minCredit;
        if (observedAt < lease.stopAt) {
            uint96 termsDeposit = _depositBefore[leaseId];
            credit = _proRata(lease, termsDeposit, observedAt);
            minCredit = uint256(_collateral(termsDeposit, lease.collateralBps)) * _params.faultMinCreditBps / BPS;
        } else {
            credit = collateral * (end - observedAt) / (end - lease.start);
            minCredit = collateral * _params.faultMinCreditBps / BPS;
        }
        if (credit < minCredit) credit = minCredit;
        credit = _min(credit + overpaid, collateral);
    }

    /// @dev The provider's consent to extend `lease`: a valid offer for its machine at a nonzero price (minimum bid
    ///      for an interruptible lease) not above the lease's, locking at least the lease's collateralBps.
    function _requireConsent(uint256 leaseId, Lease memory lease, Offer calldata offer, bytes calldata signature)
        private
        view
    {
        _verifyOffer(offer, signature);
        if (offer.provider != lease.provider || offer.machineId != lease.machineId) {
            revert OfferForOtherMachine(leaseId, offer.provider, offer.machineId);
        }
        // A zero price consents to nothing: no interruptible capacity, or no on-demand price.
        uint96 offerPrice = lease.interruptible ? offer.minBidPerUnitSecond : offer.pricePerUnitSecond;
        if (offerPrice == 0) {
            if (lease.interruptible) revert InterruptibleNotOffered(offer.machineId);
            revert ZeroPrice();
        }
        if (offerPrice > lease.price) revert ExtensionPriceTooHigh(offerPrice, lease.price);
        // The extension locks lease.collateralBps of its deposit: the provider must have offered at least that.
        if (offer.collateralBps < lease.collateralBps) {
            revert ExtensionCollateralTooLow(offer.collateralBps, lease.collateralBps);
        }
    }

    /// @dev A preempting lease owes its notice period on all its units: it cannot release any before paying it
    ///      (never while Open; once Active, from activation plus the notice).
    function _requireNoticePaid(uint256 leaseId, Lease memory lease) private view {
        uint256 paidFrom = uint256(lease.start) + _params.preemptionNotice;
        if (lease.status == LeaseStatus.Open || block.timestamp < paidFrom) {
            revert PreemptionNoticeUnpaid(leaseId, lease.status == LeaseStatus.Open ? 0 : paidFrom);
        }
    }

    /// @dev A shrink restarts metering now: the deposit before a recent extension (still used by a termination
    ///      within the window) is restated for the kept units from now to the end it bought.
    function _restateDepositBefore(uint256 leaseId, Lease memory lease, uint16 newUnits) private {
        uint256 endBefore = lease.start + _depositBefore[leaseId] / _rate(lease.units, lease.price);
        _depositBefore[leaseId] =
            endBefore > block.timestamp ? uint96(uint256(newUnits) * lease.price * (endBefore - block.timestamp)) : 0;
    }

    /// @dev collateral(deposit_) x (end_ - at) / (end_ - start), where end_ is when deposit_ runs out: the share of
    ///      the promised time left at `at`, on the lease as if its deposit were deposit_ (zero once end_ passed).
    function _proRata(Lease memory lease, uint96 deposit_, uint256 at) private pure returns (uint256) {
        uint256 end_ = lease.start + deposit_ / _rate(lease.units, lease.price);
        if (end_ <= at) return 0;
        return uint256(_collateral(deposit_, lease.collateralBps)) * (end_ - at) / (end_ - lease.start);
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
