package target

import (
	"fmt"
	"maps"
	"slices"

	"github.com/probed/probed/engine/field"
)

// Bounds of a selection (the names and label selector of a Watch, the
// label selector of a list): what one request may make probed hold for as
// long as it lasts.
const (
	// MaxSelectionNames is how many target names a selection may list.
	MaxSelectionNames = 1000
	// MaxSelectionBytes bounds the bytes of a selection's names, label
	// keys and values together.
	MaxSelectionBytes = 64 << 10
)

// ValidateSelection checks a selection: at most MaxSelectionNames valid
// target names (field "names"), a label selector of at most MaxLabels
// valid labels (a target carries no more, so a larger selector matches
// nothing; field "labelSelector"), and at most MaxSelectionBytes in all.
// An oversized list is reported as such, without checking its entries.
func ValidateSelection(names []string, labels map[string]string) field.List {
	var errs field.List
	namesPath, labelsPath := field.NewPath("names"), field.NewPath("labelSelector")
	size := 0
	if len(names) > MaxSelectionNames {
		errs = append(errs, field.Invalid(namesPath, len(names), fmt.Sprintf("must list at most %d names", MaxSelectionNames)))
	} else {
		for i, n := range names {
			errs = append(errs, ValidateName(namesPath.Index(i), n)...)
			size += len(n)
		}
		if size > MaxSelectionBytes {
			errs = append(errs, field.Invalid(namesPath, size, fmt.Sprintf("must total at most %d bytes", MaxSelectionBytes)))
		}
	}
	if len(labels) > MaxLabels {
		return append(errs, field.Invalid(labelsPath, len(labels), fmt.Sprintf("must have at most %d labels (as many as a target may carry)", MaxLabels)))
	}
	labelBytes := 0
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		errs = append(errs, ValidateLabel(labelsPath.Key(k), k, labels[k])...)
		labelBytes += len(k) + len(labels[k])
	}
	if size <= MaxSelectionBytes && size+labelBytes > MaxSelectionBytes {
		errs = append(errs, field.Invalid(labelsPath, size+labelBytes, fmt.Sprintf("the names and labels of a selection must total at most %d bytes", MaxSelectionBytes)))
	}
	return errs
}
