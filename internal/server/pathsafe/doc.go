// Package pathsafe confines file names received over the wire to one base
// directory. It resolves a name the way realpath(3) would — component by
// component, following symlinks — and refuses any name whose resolution
// leaves the base directory, whether by "..", an absolute symlink or a
// symlink planted by an earlier command. The caller then opens the
// resolved name through the same os.Root, so a symlink swapped in after
// resolution still cannot lead outside.
package pathsafe
