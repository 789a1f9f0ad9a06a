// Package wire is the answers of the /v0 API as types: what the handlers
// encode and what the console, a client of the API, decodes, so that a
// field renamed on one side breaks the build of the other.
//
// It may import the domain (holon), journal, the contracts
// (gateway/contract) and the engine's views (gateway.MandateState): types
// only, no room.
package wire

import "holon.dev/holon"

// ApprovalsPage is the most GET /v0/approvals shows at once, and its
// default.
const ApprovalsPage = 200

// ReceiptTree is GET /v0/receipts/{id}: a receipt with its children's
// trees.
type ReceiptTree struct {
	Receipt  *holon.Receipt `json:"receipt"`
	Children []*ReceiptTree `json:"children"`
	// Refunds are the root receipt's refunds, oldest first, where the
	// answer lists them (GET /v0/receipts/{id}).
	Refunds []*holon.Refund `json:"refunds,omitempty"`
}

// Receipts reads receipts by id (the engine does).
type Receipts interface {
	Receipt(id string) (*holon.Receipt, error)
}

// maxTreeDepth bounds how deep a tree is read: below it, receipts are
// listed without their children.
const maxTreeDepth = 16

// Tree reads the tree of receipt id.
func Tree(rs Receipts, id string) (*ReceiptTree, error) { return tree(rs, id, 0) }

func tree(rs Receipts, id string, depth int) (*ReceiptTree, error) {
	rc, err := rs.Receipt(id)
	if err != nil {
		return nil, err
	}
	t := &ReceiptTree{Receipt: rc, Children: []*ReceiptTree{}}
	if depth > maxTreeDepth {
		return t, nil
	}
	for _, c := range rc.Children {
		ct, err := tree(rs, c, depth+1)
		if err != nil {
			return nil, err
		}
		t.Children = append(t.Children, ct)
	}
	return t, nil
}
