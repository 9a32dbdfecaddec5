// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.34;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {IERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/IERC20Permit.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {Address} from "@openzeppelin/contracts/utils/Address.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {ILeaseMarket} from "./interfaces/ILeaseMarket.sol";
import {IProviderRegistry} from "./interfaces/IProviderRegistry.sol";
import {LeaseMarketBase} from "./LeaseMarketBase.sol";
import {LeaseMarketExtension} from "./LeaseMarketExtension.sol";

/// @title LeaseMarket
/// @notice Escrow, per-second metered payment and QoS of GPU leases. Renters open leases on providers'
///         EIP-712 offers; deposits are held here, provider collateral in the ProviderRegistry.
/// @dev The hot paths (open, activate, claim, close, complete) and the views run here; faults, termination,
///      cancellation, settlement, extension, shrinking and governance run the LeaseMarketExtension's code by
///      delegatecall on this contract's storage (LeaseMarketBase holds the layout and the shared accounting).
contract LeaseMarket is ILeaseMarket, LeaseMarketBase {
    using SafeERC20 for IERC20;
    using SafeCast for uint256;

    /// @dev A refund owed to a preempted renter, paid after the new lease is recorded.
    struct Payment {
        address to;
        uint96 amount;
    }

    address private immutable _EXTENSION;

    /// @notice Deploys the market for a registry, with its extension and first parameters.
    /// @param registry_ The ProviderRegistry; the market settles in its token.
    /// @param extension_ A LeaseMarketExtension deployed for the same registry.
    /// @param params_ Initial market parameters (see setParams).
    constructor(address registry_, address extension_, MarketParams memory params_) LeaseMarketBase(registry_) {
        address extensionRegistry = LeaseMarketExtension(extension_).registry();
        if (extensionRegistry != registry_) revert ExtensionMismatch(registry_, extensionRegistry);
        _EXTENSION = extension_;
        _nextLeaseId = 1;
        _setParams(params_);
    }

    // ---------------------------------------------------------------- open

    /// @inheritdoc ILeaseMarket
    function openLease(Offer calldata offer, bytes calldata signature, LeaseTerms calldata terms)
        external
        nonReentrant
        returns (uint256 leaseId)
    {
        return _open(offer, signature, terms);
    }

    /// @inheritdoc ILeaseMarket
    function openLeaseWithPermit(
        Offer calldata offer,
        bytes calldata signature,
        LeaseTerms calldata terms,
        Permit calldata permit
    ) external returns (uint256) {
        _permit(permit);
        // openLease runs by delegatecall on this contract's own code (msg.sender stays the renter), so _open keeps a
        // single call site: two would let the optimizer copy it and take LeaseMarket to 0.9 KB under the size limit.
        return abi.decode(
            Address.functionDelegateCall(address(this), abi.encodeCall(this.openLease, (offer, signature, terms))),
            (uint256)
        );
    }

    /// @inheritdoc ILeaseMarket
    function activate(uint256 leaseId) external {
        // Reads slots 2 and 1 as words and writes slot 2 with one store; no Lease is built in memory.
        uint256 slot = _leaseSlot(leaseId);
        uint256 word2;
        uint256 word1;
        // solhint-disable-next-line no-inline-assembly
        assembly ("memory-safe") {
            word2 := sload(add(slot, 2))
        }
        LeaseStatus status = LeaseStatus(uint8(word2 >> 240));
        if (status != LeaseStatus.Open) revert InvalidLeaseStatus(leaseId, status);
        // solhint-disable-next-line no-inline-assembly
        assembly ("memory-safe") {
            word1 := sload(add(slot, 1))
        }
        if (msg.sender != address(uint160(word1))) revert NotProvider(leaseId, msg.sender);
        uint32 deadline = uint32(word2 >> 192);
        if (block.timestamp > deadline) revert StartDeadlinePassed(leaseId, deadline);
        uint256 now_ = block.timestamp;
        // start := now; status := Active; flags |= FLAG_ACTIVATED (deposit, paid and units unchanged).
        word2 = (word2 & ~(uint256(type(uint32).max) << 192) & ~(uint256(0xff) << 240))
            | (now_ << 192) | (uint256(uint8(LeaseStatus.Active)) << 240) | (uint256(FLAG_ACTIVATED) << 248);
        // solhint-disable-next-line no-inline-assembly
        assembly ("memory-safe") {
            sstore(add(slot, 2), word2)
        }
        uint256 rate = uint256(uint16(word2 >> 224)) * uint96(word1 >> 160);
        // Cannot truncate: openLease checked that the start deadline plus the duration fits 32 bits.
        emit LeaseActivated(leaseId, uint32(now_), uint32(now_ + uint96(word2) / rate));
    }

    // ---------------------------------------------------------------- claims

    /// @inheritdoc ILeaseMarket
    function claim(uint256 leaseId) external nonReentrant {
        (bool running, address provider, uint96 paidBefore, uint96 amount) = _accrueRunning(leaseId);
        if (running) {
            if (amount == 0) revert NothingToClaim(leaseId);
        } else {
            Lease memory lease = _leases[leaseId];
            // A completion's hold is released by the extension's claim, inside this call's guard.
            if ((lease.flags & FLAG_HELD) != 0) {
                _delegate();
                return;
            }
            if (lease.status != LeaseStatus.Active && lease.status != LeaseStatus.Ended) {
                revert InvalidLeaseStatus(leaseId, lease.status);
            }
            paidBefore = lease.paid;
            provider = lease.provider;
            bool changed;
            (amount, changed) = _accrue(leaseId, lease);
            if (!changed) revert NothingToClaim(leaseId);
        }
        _payProvider(leaseId, provider, paidBefore, paidBefore + amount);
    }

    /// @inheritdoc ILeaseMarket
    function claimMany(uint256[] calldata leaseIds) external nonReentrant {
        uint256 count = leaseIds.length;
        if (count > MAX_BATCH) revert BatchTooLarge(count, MAX_BATCH);
        MarketParams memory params_ = _params;
        // Consecutive leases of one provider share one transfer: the current run is kept on the stack and
        // recorded only when the provider changes; every transfer happens after every lease is written.
        Payment[] memory payments = new Payment[](count);
        uint256 runs;
        address runProvider;
        uint256 runAmount;
        uint256 fees;
        for (uint256 i; i < count; ++i) {
            uint256 leaseId = leaseIds[i];
            (bool running, address provider, uint96 paidBefore, uint96 amount) = _accrueRunning(leaseId);
            if (!running) (provider, paidBefore, amount) = _claimOther(leaseId);
            if (amount == 0) continue;
            // The fee on the lease's cumulative payments, so splitting claims never changes the treasury's total.
            uint96 fee;
            if (params_.protocolFeeBps != 0) {
                fee = _fee(paidBefore + amount, params_.protocolFeeBps) - _fee(paidBefore, params_.protocolFeeBps);
            }
            emit LeaseClaimed(leaseId, provider, amount, fee);
            if (provider != runProvider) {
                if (runAmount != 0) {
                    payments[runs] = Payment(runProvider, runAmount.toUint96());
                    ++runs;
                }
                runProvider = provider;
                runAmount = 0;
            }
            // Cannot overflow: 64 amounts below 2^96 each (a run above 2^96 is refused by toUint96); fee <= amount.
            unchecked {
                fees += fee;
                runAmount += amount - fee;
            }
        }
        if (runAmount != 0) {
            payments[runs] = Payment(runProvider, runAmount.toUint96());
            ++runs;
        }
        for (uint256 i; i < runs; ++i) {
            _pay(payments[i].to, payments[i].amount);
        }
        _pay(params_.treasury, fees);
    }

    // ---------------------------------------------------------------- ends

    /// @inheritdoc ILeaseMarket
    function close(uint256 leaseId) external nonReentrant {
        Lease memory lease = _leases[leaseId];
        if (msg.sender != lease.renter) revert NotRenter(leaseId, msg.sender);
        uint256 refund;
        if (lease.status == LeaseStatus.Open) {
            refund = _finish(
                leaseId,
                lease,
                EndReason.RenterClosed,
                uint32(block.timestamp),
                _preemptorMinimum(lease, 0),
                0,
                IProviderRegistry.Outcome.Neutral
            );
        } else if (lease.status == LeaseStatus.Active) {
            uint256 end = _endOf(lease);
            if (block.timestamp >= end) {
                _expire(leaseId, lease, end);
            } else {
                refund = _finish(
                    leaseId,
                    lease,
                    EndReason.RenterClosed,
                    uint32(block.timestamp),
                    _committedMinimum(leaseId, lease, _preemptorMinimum(lease, _accruedUntil(lease, block.timestamp))),
                    0,
                    IProviderRegistry.Outcome.Completed
                );
            }
        } else {
            revert InvalidLeaseStatus(leaseId, lease.status);
        }
        _pay(lease.renter, refund);
    }

    /// @inheritdoc ILeaseMarket
    function complete(uint256 leaseId, int32 exitCode, bytes32 outputDigest, uint64 unitSeconds)
        external
        nonReentrant
    {
        Lease memory lease = _leases[leaseId];
        if (lease.status != LeaseStatus.Active) revert InvalidLeaseStatus(leaseId, lease.status);
        if (msg.sender != lease.provider) revert NotProvider(leaseId, msg.sender);
        uint256 stop = _min(block.timestamp, _endOf(lease));
        uint96 total = _accruedUntil(lease, stop);
        uint96 paidBefore = lease.paid;
        // The renter is refunded and the units freed now. The provider is paid until stop - FAULT_SUBMISSION_WINDOW;
        // its pay for the last window and the collateral stay held (FLAG_HELD: `deposit` keeps the lease's deposit),
        // so a fault observed before the completion still lands and takes back the pay after observedAt in full;
        // `claim` releases both after the window, and only then does reputation count the lease (issue #34, finding 1).
        uint96 payNow = _paidUntil(lease, stop);
        if (payNow > paidBefore) lease.paid = payNow;
        lease.stopAt = uint32(stop);
        lease.endReason = EndReason.Completed;
        lease.status = LeaseStatus.Settled;
        lease.flags |= FLAG_HELD;
        _storeEnd(leaseId, lease);
        _REGISTRY.release(
            lease.provider,
            lease.machineId,
            lease.units,
            lease.interruptible,
            0,
            0,
            lease.renter,
            0,
            IProviderRegistry.Outcome.Neutral
        );
        uint96 refund = lease.deposit - total;
        emit LeaseEnded(leaseId, EndReason.Completed, uint32(stop), total, refund, 0);
        emit CompletionReported(leaseId, exitCode, outputDigest, unitSeconds);
        _payProvider(leaseId, lease.provider, paidBefore, lease.paid);
        _pay(lease.renter, refund);
    }

    // ---------------------------------------------------------------- run by the extension

    /// @inheritdoc ILeaseMarket
    function submitFault(Fault calldata, bytes[] calldata) external {
        _delegate();
    }

    /// @inheritdoc ILeaseMarket
    function terminate(uint256) external {
        _delegate();
    }

    /// @inheritdoc ILeaseMarket
    function cancel(uint256) external {
        _delegate();
    }

    /// @inheritdoc ILeaseMarket
    function settle(Settlement calldata, bytes calldata, bytes calldata) external {
        _delegate();
    }

    /// @inheritdoc ILeaseMarket
    function extend(uint256, uint32, Offer calldata, bytes calldata) external {
        _delegate();
    }

    /// @inheritdoc ILeaseMarket
    function shrink(uint256, uint16) external {
        _delegate();
    }

    /// @inheritdoc ILeaseMarket
    function setParams(MarketParams calldata) external {
        _delegate();
    }

    /// @inheritdoc ILeaseMarket
    function withdraw(address) external {
        _delegate();
    }

    // ---------------------------------------------------------------- views

    /// @inheritdoc ILeaseMarket
    function getLease(uint256 leaseId) external view returns (LeaseView memory view_) {
        Lease memory lease = _leases[leaseId];
        view_.renter = lease.renter;
        view_.provider = lease.provider;
        view_.machineId = lease.machineId;
        view_.units = lease.units;
        view_.pricePerUnitSecond = lease.price;
        view_.interruptible = lease.interruptible;
        view_.collateralBps = lease.collateralBps;
        view_.deposit = lease.deposit;
        view_.paid = lease.paid;
        view_.status = lease.status;
        view_.endReason = lease.endReason;
        if (lease.status == LeaseStatus.None) return view_;
        bool activated = (lease.flags & FLAG_ACTIVATED) != 0;
        if (activated) view_.activatedAt = lease.start;
        else view_.startDeadline = lease.start;
        if (lease.status == LeaseStatus.Open || lease.status == LeaseStatus.Active) {
            // stopAt holds the latest extension's time while the lease runs; the view shows zero.
            view_.collateral = _collateral(lease.deposit, lease.collateralBps);
            view_.duration = uint32(lease.deposit / _rate(lease.units, lease.price));
            if (activated) view_.end = lease.start + view_.duration;
        } else {
            view_.stopAt = lease.stopAt;
            view_.end = lease.stopAt;
            if (activated) view_.duration = lease.stopAt - lease.start;
            if ((lease.flags & FLAG_HELD) != 0) {
                // A completion's hold: the collateral and the last window's pay stay held until stopAt +
                // FAULT_SUBMISSION_WINDOW; the deposit shown is the provider's total.
                view_.collateral = _collateral(lease.deposit, lease.collateralBps);
                view_.deposit = _accruedUntil(lease, lease.stopAt);
            }
        }
        view_.accrued = _accruedNow(lease);
        view_.claimable = _claimableNow(lease);
    }

    /// @inheritdoc ILeaseMarket
    function accrued(uint256 leaseId) external view returns (uint96) {
        return _accruedNow(_leases[leaseId]);
    }

    /// @inheritdoc ILeaseMarket
    function claimable(uint256 leaseId) external view returns (uint96) {
        return _claimableNow(_leases[leaseId]);
    }

    /// @inheritdoc ILeaseMarket
    function owed(address account) external view returns (uint256) {
        return _owed[account];
    }

    /// @inheritdoc ILeaseMarket
    function params() external view returns (MarketParams memory) {
        return _params;
    }

    /// @inheritdoc ILeaseMarket
    function domainSeparator() external view returns (bytes32) {
        return _domainSeparatorV4();
    }

    /// @inheritdoc ILeaseMarket
    function nextLeaseId() external view returns (uint256) {
        return _nextLeaseId;
    }

    /// @inheritdoc ILeaseMarket
    function token() external view returns (address) {
        return address(_TOKEN);
    }

    /// @inheritdoc ILeaseMarket
    function registry() external view returns (address) {
        return address(_REGISTRY);
    }

    /// @inheritdoc ILeaseMarket
    function extension() external view returns (address) {
        return _EXTENSION;
    }

    // ---------------------------------------------------------------- internals

    /// @dev Submits the caller's EIP-2612 permit inside the reentrancy guard, so a hostile token's permit cannot
    ///      re-enter the market. A failed permit is ignored: anyone who saw it in the mempool may have submitted it
    ///      first; the allowance is then already in place and the deposit pull still succeeds.
    function _permit(Permit calldata permit) private nonReentrant {
        try IERC20Permit(address(_TOKEN)).permit(
            msg.sender, address(this), permit.value, permit.deadline, permit.v, permit.r, permit.s
        ) {} catch {}
    }

    /// @dev Runs the same call on the extension's code with this contract's storage; reverts bubble up.
    function _delegate() private {
        Address.functionDelegateCall(_EXTENSION, msg.data);
    }

    function _open(Offer calldata offer, bytes calldata signature, LeaseTerms calldata terms)
        private
        returns (uint256 leaseId)
    {
        _verifyOffer(offer, signature);
        // A shorter window lets a renter collect the start penalty from a provider that had no time to start.
        if (offer.startWindow < MIN_START_WINDOW) revert StartWindowTooShort(offer.startWindow, MIN_START_WINDOW);
        uint16 units = terms.units;
        if (units == 0) revert ZeroUnits();
        uint32 duration = terms.duration;
        uint32 minDuration = offer.minDuration;
        if (duration == 0 || duration < minDuration || duration > offer.maxDuration) {
            revert DurationOutOfRange(duration, minDuration, offer.maxDuration);
        }
        uint96 price = _priceOf(offer, terms);
        uint96 deposit = (_rate(units, price) * duration).toUint96();
        uint96 collateral = _collateral(deposit, offer.collateralBps);
        leaseId = _nextLeaseId;
        ++_nextLeaseId;

        Payment[] memory refunds;
        bool preempted;
        if (terms.preempt.length != 0) {
            uint256 evicted;
            (refunds, preempted, evicted) =
                _makeRoom(leaseId, offer.machineId, units, terms.interruptible, price, terms.preempt);
            // A bid owes at least (_preemptorMinimum) the notice of every lease it evicts: a small, short bid
            // cannot evict a large lease for less than that lease's notice is worth, then retake its units at
            // the minimum bid. An on-demand lease pays the offer's on-demand price, which every interruptible
            // lease of that offer yields to by its terms.
            uint256 owes = _min(_rate(units, price) * _params.preemptionNotice, deposit);
            if (terms.interruptible && owes < evicted) revert PreemptionUnderpriced(owes, evicted);
        }
        _REGISTRY.reserve(
            offer.provider,
            offer.machineId,
            offer.model,
            units,
            terms.interruptible,
            collateral,
            offer.nonce,
            offer.renter != address(0)
        );
        uint8 flags = preempted ? FLAG_PREEMPTOR : 0;
        if (minDuration >= MIN_COMMITMENT) {
            // A reserved-term offer: its discount is paid for with the commitment (close charges it).
            flags |= FLAG_COMMITTED;
            _commitment[leaseId] = minDuration;
        }
        _record(leaseId, offer, terms, price, deposit, collateral, flags);
        _pull(msg.sender, deposit);
        for (uint256 i; i < refunds.length; ++i) {
            _pay(refunds[i].to, refunds[i].amount);
        }
    }

    /// @dev Writes a new lease's three slots and announces it.
    function _record(
        uint256 leaseId,
        Offer calldata offer,
        LeaseTerms calldata terms,
        uint96 price,
        uint96 deposit,
        uint96 collateral,
        uint8 flags
    ) private {
        uint32 startDeadline = (block.timestamp + offer.startWindow).toUint32();
        // Every timestamp of the lease, up to its latest possible end, must fit 32 bits.
        (uint256(startDeadline) + terms.duration).toUint32();
        uint16 units = terms.units;
        Lease memory lease = Lease({
            renter: msg.sender,
            stopAt: 0,
            machineId: offer.machineId,
            collateralBps: offer.collateralBps,
            endReason: EndReason.None,
            interruptible: terms.interruptible,
            provider: offer.provider,
            price: price,
            deposit: deposit,
            paid: 0,
            start: startDeadline,
            units: units,
            status: LeaseStatus.Open,
            flags: flags
        });
        uint256 slot = _leaseSlot(leaseId);
        _storeWord0(slot, lease);
        _storeWord1(slot, lease);
        _storeWord2(slot, lease);
        emit LeaseOpened(
            leaseId,
            offer.provider,
            msg.sender,
            offer.machineId,
            units,
            price,
            terms.interruptible,
            deposit,
            collateral,
            startDeadline,
            offer.nonce
        );
    }

    function _priceOf(Offer calldata offer, LeaseTerms calldata terms) private pure returns (uint96 price) {
        if (terms.interruptible) {
            uint96 minBid = offer.minBidPerUnitSecond;
            if (minBid == 0) revert InterruptibleNotOffered(offer.machineId);
            price = terms.bidPerUnitSecond;
            if (price < minBid) revert BidTooLow(price, minBid);
        } else {
            price = offer.pricePerUnitSecond;
            if (price == 0) revert ZeroPrice();
        }
        if (price > terms.maxPricePerUnitSecond) revert PriceAboveCap(price, terms.maxPricePerUnitSecond);
    }

    /// @dev Frees units on `machineId` from the listed leases, in order, until `units` are idle: leases past
    ///      their end are finalized, eligible interruptible leases preempted. Returns the refunds owed, whether
    ///      any lease was preempted and the notice of the preempted leases (each one's units x price x
    ///      min(preemptionNotice, its time left)).
    function _makeRoom(
        uint256 byLeaseId,
        uint32 machineId,
        uint16 units,
        bool interruptible,
        uint96 bid,
        uint256[] calldata leaseIds
    ) private returns (Payment[] memory refunds, bool preempted, uint256 evicted) {
        uint256 count = leaseIds.length;
        if (count > MAX_PREEMPT) revert TooManyPreemptions(count, MAX_PREEMPT);
        (uint16 total, uint16 onDemand, uint16 interrupt) = _REGISTRY.capacityOf(machineId);
        uint256 idle = total - onDemand - interrupt;
        refunds = new Payment[](count);
        for (uint256 i; i < count && idle < units; ++i) {
            uint256 leaseId = leaseIds[i];
            Lease memory lease = _leases[leaseId];
            if (lease.machineId != machineId) revert PreemptWrongMachine(leaseId, machineId);
            // Its own provider would end it without the termination (or start) penalty (issue #34, finding 1).
            if (lease.provider == msg.sender && lease.renter != msg.sender) revert SelfPreemption(leaseId);
            if (lease.status == LeaseStatus.Active && block.timestamp >= _endOf(lease)) {
                _expire(leaseId, lease, _endOf(lease));
            } else {
                bool running = lease.status == LeaseStatus.Open || lease.status == LeaseStatus.Active;
                // An on-demand lease preempts any interruptible one; an interruptible bid only lower bids.
                if (!running || !lease.interruptible || (interruptible && lease.price >= bid)) {
                    revert NotPreemptible(leaseId);
                }
                // Time left: to the end once Active (not yet reached, above), the whole duration while Open.
                uint256 left = lease.status == LeaseStatus.Active
                    ? _endOf(lease) - block.timestamp
                    : lease.deposit / _rate(lease.units, lease.price);
                evicted += _rate(lease.units, lease.price) * _min(_params.preemptionNotice, left);
                refunds[i] = Payment(lease.renter, _preempt(leaseId, lease, byLeaseId));
                preempted = true;
            }
            idle += lease.units;
        }
    }

    /// @dev Ends an Active lease that ran to its end (`end` <= now; the caller has set `paid`, which it pays). Until
    ///      end + FAULT_SUBMISSION_WINDOW a fault observed in the lease's last window can still land, so the lease is
    ///      held as a completion is (FLAG_HELD, reason Expired): its units go back now, its collateral and the pay
    ///      beyond `paid` stay in escrow until the releasing claim after the window (or a fault, or the renter's
    ///      co-signature). The renter is owed nothing: the deposit was all accrued. After the window nothing can land,
    ///      and it is finalized at once.
    function _expire(uint256 leaseId, Lease memory lease, uint256 end) private {
        if (block.timestamp >= end + FAULT_SUBMISSION_WINDOW) {
            _finish(leaseId, lease, EndReason.Expired, uint32(end), lease.deposit, 0, IProviderRegistry.Outcome.Completed);
            return;
        }
        lease.stopAt = uint32(end);
        lease.endReason = EndReason.Expired;
        lease.status = LeaseStatus.Settled;
        lease.flags |= FLAG_HELD;
        _storeEnd(leaseId, lease);
        _REGISTRY.release(
            lease.provider,
            lease.machineId,
            lease.units,
            lease.interruptible,
            0,
            0,
            lease.renter,
            0,
            IProviderRegistry.Outcome.Neutral
        );
        emit LeaseEnded(leaseId, EndReason.Expired, uint32(end), lease.deposit, 0, 0);
    }

    /// @dev Ends an interruptible lease for `byLeaseId`: it keeps running and accruing for the notice period
    ///      (never past its end); the rest of the deposit is refunded now and its units freed now.
    function _preempt(uint256 leaseId, Lease memory lease, uint256 byLeaseId) private returns (uint96 refund) {
        uint256 stop = block.timestamp;
        uint96 total;
        if (lease.status == LeaseStatus.Active) {
            stop = _min(block.timestamp + _params.preemptionNotice, _endOf(lease));
            total = _accruedUntil(lease, stop);
        }
        // No credit: the refund is at most the deposit, so it fits 96 bits.
        refund = uint96(
            _finish(leaseId, lease, EndReason.Preempted, uint32(stop), total, 0, IProviderRegistry.Outcome.Neutral)
        );
        emit LeasePreempted(leaseId, byLeaseId, uint32(stop));
    }

    /// @dev What a renter closing its lease owes: `accrued_`, but a lease that preempted another owes at least
    ///      min(preemptionNotice, duration) seconds of its units x price, so preempting is never free.
    function _preemptorMinimum(Lease memory lease, uint96 accrued_) private view returns (uint96) {
        if ((lease.flags & FLAG_PREEMPTOR) == 0) return accrued_;
        uint256 minimum = _min(_rate(lease.units, lease.price) * _params.preemptionNotice, lease.deposit);
        return accrued_ > minimum ? accrued_ : uint96(minimum);
    }

    /// @dev What a renter closing its Active lease owes: `owed`, but a reserved-term lease (FLAG_COMMITTED) owes at
    ///      least units x price x its offer's minDuration, so a tier's discount is never had without its commitment.
    ///      Never above the deposit: the duration is at least minDuration, and a shrink waits for the commitment.
    function _committedMinimum(uint256 leaseId, Lease memory lease, uint96 owed_) private view returns (uint96) {
        if ((lease.flags & FLAG_COMMITTED) == 0) return owed_;
        uint256 minimum = _rate(lease.units, lease.price) * _commitment[leaseId];
        return owed_ > minimum ? owed_ : uint96(minimum);
    }

    /// @dev Brings `paid` up to what accrued (the caller pays the provider the returned amount). An Active
    ///      lease past its end is finalized; an Ended lease whose accrual is over becomes Settled.
    ///      `changed` is false when nothing accrued and nothing was finalized.
    function _accrue(uint256 leaseId, Lease memory lease) private returns (uint96 amount, bool changed) {
        if (lease.status == LeaseStatus.Active) {
            uint256 end = _endOf(lease);
            if (block.timestamp >= end) {
                // Within the fault window after the end the last window's pay stays held (_expire); after it, all of it.
                uint96 paidBefore = lease.paid;
                uint96 payNow =
                    block.timestamp < end + FAULT_SUBMISSION_WINDOW ? _paidUntil(lease, end) : lease.deposit;
                if (payNow > paidBefore) lease.paid = payNow;
                _expire(leaseId, lease, end);
                return (lease.paid - paidBefore, true);
            }
        }
        uint96 total = _payableNow(lease);
        amount = total - lease.paid;
        if (lease.status == LeaseStatus.Ended && total == lease.deposit) {
            lease.paid = total;
            lease.status = LeaseStatus.Settled;
            _storeState(leaseId, lease);
            return (amount, true);
        }
        if (amount == 0) return (0, false);
        lease.paid = total;
        _storeState(leaseId, lease);
        return (amount, true);
    }

    /// @dev The common claim: an Active lease before its end. Reads slots 1 and 2 as words and, if anything accrued,
    ///      writes the new `paid` into slot 2 with one store; no Lease is built in memory. `running` is false for
    ///      any other lease (the caller takes the general path, which loads the whole lease).
    function _accrueRunning(uint256 leaseId)
        private
        returns (bool running, address provider, uint96 paidBefore, uint96 amount)
    {
        uint256 slot = _leaseSlot(leaseId);
        uint256 word2;
        // solhint-disable-next-line no-inline-assembly
        assembly ("memory-safe") {
            word2 := sload(add(slot, 2))
        }
        if (uint8(word2 >> 240) != uint8(LeaseStatus.Active)) return (false, address(0), 0, 0);
        uint256 word1;
        // solhint-disable-next-line no-inline-assembly
        assembly ("memory-safe") {
            word1 := sload(add(slot, 1))
        }
        // An Active lease has units > 0 and price > 0 (checked at open, kept by shrink).
        uint256 rate = uint256(uint16(word2 >> 224)) * uint96(word1 >> 160);
        uint256 start = uint32(word2 >> 192);
        if (block.timestamp >= start + uint96(word2) / rate) return (false, address(0), 0, 0);
        // The last FAULT_SUBMISSION_WINDOW seconds' pay stays in escrow (_paidUntil): a fault observed in them takes
        // it back. Before the end, units x price x elapsed is below the deposit, so it fits 96 bits.
        uint256 total;
        if (block.timestamp > start + FAULT_SUBMISSION_WINDOW) total = rate * (block.timestamp - FAULT_SUBMISSION_WINDOW - start);
        paidBefore = uint96(word2 >> 96);
        // Cannot underflow: paid only ever reaches what this lagged total was at an earlier time.
        amount = uint96(total - paidBefore);
        provider = address(uint160(word1));
        running = true;
        if (amount != 0) {
            word2 = (word2 & ~(uint256(type(uint96).max) << 96)) | (total << 96);
            // solhint-disable-next-line no-inline-assembly
            assembly ("memory-safe") {
                sstore(add(slot, 2), word2)
            }
        }
    }

    /// @dev A lease of claimMany that _accrueRunning did not take: brings `paid` up to what accrued and returns what
    ///      the provider is paid now (zero for a lease that is not Active or Ended, or has nothing new).
    function _claimOther(uint256 leaseId) private returns (address provider, uint96 paidBefore, uint96 amount) {
        Lease memory lease = _leases[leaseId];
        if (lease.status != LeaseStatus.Active && lease.status != LeaseStatus.Ended) return (address(0), 0, 0);
        paidBefore = lease.paid;
        (amount,) = _accrue(leaseId, lease);
        return (lease.provider, paidBefore, amount);
    }

    /// @dev The provider's total so far: Active leases accrue until their end, Ended leases until stopAt
    ///      (after stopAt their deposit is the final total); other states have nothing left to accrue.
    function _accruedNow(Lease memory lease) private view returns (uint96) {
        if (lease.status == LeaseStatus.Active) {
            return _accruedUntil(lease, _min(block.timestamp, _endOf(lease)));
        }
        if (lease.status == LeaseStatus.Ended) {
            if (block.timestamp >= lease.stopAt) return lease.deposit;
            uint96 sofar = _accruedUntil(lease, block.timestamp);
            return sofar < lease.deposit ? sofar : lease.deposit;
        }
        // A held completion: the provider's total is what accrued until its stop (the renter has the rest).
        if ((lease.flags & FLAG_HELD) != 0) return _accruedUntil(lease, lease.stopAt);
        return lease.paid;
    }

    /// @dev What the provider may have been paid by now: what accrued, less the last FAULT_SUBMISSION_WINDOW seconds of
    ///      a lease a fault can still reach (Active, until the window after its end; or preempted and in its notice), which stay
    ///      in escrow until the window has passed them (_paidUntil). Never below `paid`.
    function _payableNow(Lease memory lease) private view returns (uint96 total) {
        total = _accruedNow(lease);
        // An Active lease past its end is still reachable for the fault window after it (a claim then holds it).
        uint256 end = lease.status == LeaseStatus.Active ? _endOf(lease) : lease.stopAt;
        bool reachable = lease.status == LeaseStatus.Active
            ? block.timestamp < end + FAULT_SUBMISSION_WINDOW
            : lease.status == LeaseStatus.Ended && block.timestamp < end;
        if (reachable) {
            uint96 lagged = _paidUntil(lease, _min(block.timestamp, end));
            if (lagged < total) total = lagged;
        }
        if (total < lease.paid) total = lease.paid;
    }

    /// @dev What a claim pays now (before the fee): a held completion's pay only once its window has passed.
    function _claimableNow(Lease memory lease) private view returns (uint96) {
        if ((lease.flags & FLAG_HELD) != 0) {
            if (block.timestamp < uint256(lease.stopAt) + FAULT_SUBMISSION_WINDOW) return 0;
            return _accruedUntil(lease, lease.stopAt) - lease.paid;
        }
        return _payableNow(lease) - lease.paid;
    }
}
