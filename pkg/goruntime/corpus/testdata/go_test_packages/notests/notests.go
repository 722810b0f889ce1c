// Package notests has no tests.
package notests

// Name is a constant.
const Name = "notests"
