package ingress

import "fmt"

// The ingress book's waiter slots: a write with ?wait=applied holds one while it waits
// (the node's ?wait=applied middleware); the policy and its refusal message live here, with the slots.

// MaxWaitersPerAccount bounds one account's waiting writes on a node.
const MaxWaitersPerAccount = 8

// adminWaiterShare: application tokens together hold at most all but 1/adminWaiterShare
// of a node's waiter slots (56 of 64): the rest are the admin's, so tenants of several
// accounts, each within its own share, cannot make the control plane's waits fail.
const adminWaiterShare = 8

// TakeWaiter takes a waiter slot for account ("" for the admin), or reports that none
// is free, and why (the policy's numbers).
func (b *Book) TakeWaiter(account string) (ok bool, why string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.takeWaiterLocked(account) {
		return false, fmt.Sprintf("%d writes are waiting with wait=applied on this node (at most %d, %d per account, %d for application tokens together); nothing was written; retry, or write without wait",
			len(b.waiters), cap(b.waiters), MaxWaitersPerAccount, cap(b.waiters)-cap(b.waiters)/adminWaiterShare)
	}
	return true, ""
}

func (b *Book) takeWaiterLocked(account string) bool {
	if account != "" {
		if b.waiting[account] >= MaxWaitersPerAccount {
			return false
		}
		tenants := 0
		for _, n := range b.waiting {
			tenants += n
		}
		if tenants >= cap(b.waiters)-cap(b.waiters)/adminWaiterShare {
			return false
		}
	}
	select {
	case b.waiters <- struct{}{}:
	default:
		return false
	}
	if account != "" {
		b.waiting[account]++
	}
	return true
}

// changes is closed when a local report changes next.
func (b *Book) changes() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.changed
}

func (b *Book) ReleaseWaiter(account string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	<-b.waiters
	if account != "" {
		if b.waiting[account]--; b.waiting[account] <= 0 {
			delete(b.waiting, account)
		}
	}
}

// Waiters returns the waiter slots held and their number.
func (b *Book) Waiters() (held, slots int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.waiters), cap(b.waiters)
}

// SetWaiterSlots sets the number of waiter slots (maxWaiters; a test lowers it); only
// while no write waits.
func (b *Book) SetWaiterSlots(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.waiters = make(chan struct{}, n)
}
