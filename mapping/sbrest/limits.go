package sbrest

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/qbridge/qbridge/mapping"
)

// fitHeaders writes the envelope property and enforces the 32 KB per
// property and 64 KB total limits: the envelope is shed member by member
// (mapping.ShedOrder) first, then Drop leaves out the largest user
// attributes until the properties fit. Shed members are appended to *shed.
func (e *encoded) fitHeaders(opt *mapping.Options, f form, env *mapping.Envelope, shed *[]string) error {
	e.bpJSON = appendBrokerProperties(make([]byte, 0, 256), &e.bp)
	for {
		envProp, err := envelopeProp(env, f)
		if err != nil {
			return err
		}
		if envProp != nil && envProp.size() > MaxPropertySize {
			if name := env.ShedNext(); name != "" {
				*shed = append(*shed, name)
				continue
			}
			return mapping.TooLargef(Wire, mapping.EnvelopeName, "%d bytes, more than Service Bus's %d per property", envProp.size(), MaxPropertySize)
		}
		total := len(e.bpJSON) + len(e.contentType)
		for _, p := range e.props {
			total += p.size()
		}
		if envProp != nil {
			total += envProp.size()
		}
		if total <= MaxHeaderSize {
			if envProp != nil {
				e.props = append(e.props, *envProp)
			}
			slices.SortFunc(e.props, func(x, y prop) int { return cmp.Compare(x.name, y.name) })
			e.headerBytes = total
			return nil
		}
		if name := env.ShedNext(); name != "" {
			*shed = append(*shed, name)
			continue
		}
		if opt.Policy != mapping.Drop {
			return mapping.TooLargef(Wire, "properties", "%d bytes of properties, more than Service Bus's %d", total, MaxHeaderSize)
		}
		// Leave out the largest user attribute and try again.
		i := -1
		for j, p := range e.props {
			if p.user && (i < 0 || p.size() > e.props[i].size()) {
				i = j
			}
		}
		if i < 0 {
			return mapping.TooLargef(Wire, "properties", "%d bytes of properties, more than Service Bus's %d", total, MaxHeaderSize)
		}
		p := e.props[i]
		opt.Dropped(attrField(p.name), fmt.Sprintf("properties exceed Service Bus's %d bytes", MaxHeaderSize))
		env.Forget(p.name)
		e.props = slices.Delete(e.props, i, i+1)
	}
}

// unfit takes the envelope property out again, for another fitHeaders.
func (e *encoded) unfit() {
	e.props = slices.DeleteFunc(e.props, func(p prop) bool { return !p.user && p.name == mapping.EnvelopeName })
}

// envelopeProp renders the envelope as the qbridge.envelope property, or nil.
func envelopeProp(env *mapping.Envelope, f form) (*prop, error) {
	if env.Empty() {
		return nil, nil
	}
	s, err := env.Marshal()
	if err != nil {
		// e.g. a time outside years 0-9999, which JSON times cannot hold.
		return nil, mapping.Rejectf(Wire, mapping.EnvelopeName, "%v", err)
	}
	if f == formHeader {
		s = asciiJSON(s)
	}
	return &prop{name: mapping.EnvelopeName, v: wireValue{text: s, quoted: true, inferred: dtString}}, nil
}
