package web

import "strconv"

// Chart is a bar chart by day, drawn as inline SVG by the server, so it
// needs no script: one slot per day, one bar per series in each slot.
type Chart struct {
	ID, Title string
	Series    []ChartSeries // the legend
	Bars      []ChartBar
	// Width and Height are the SVG's coordinate space; the page scales it.
	Width, Height int
	Baseline      int    // y of the axis line
	Max           string // the value at the top of the chart, formatted
	First, Last   string // the first and last day, under the axis
	Empty         bool   // every value is zero
}

// ChartSeries is one measured quantity of a chart.
type ChartSeries struct {
	Name  string
	Class string // CSS class of its bars (and legend swatch)
	// Values holds one exact value per day; Labels the same values
	// formatted for people (money as decimals, counts as integers).
	Values []int64
	Labels []string
}

// ChartBar is one drawn bar, with the tooltip that names its exact value.
type ChartBar struct {
	X, Y, W, H string
	Class, Tip string
}

// Chart geometry, in SVG units.
const (
	chartWidth  = 720
	chartHeight = 160
	chartTop    = 8 // headroom over the highest bar
	chartGap    = 0.2
)

// NewChart lays out series over days (the labels of the slots, oldest
// first). Every series must have one value per day; the tallest value
// fills the chart and maxLabel formats it for the axis.
func NewChart(id, title string, days []string, maxLabel func(int64) string, series ...ChartSeries) Chart {
	c := Chart{ID: id, Title: title, Series: series, Width: chartWidth, Height: chartHeight, Baseline: chartHeight - 1}
	if len(days) > 0 {
		c.First, c.Last = days[0], days[len(days)-1]
	}
	var top int64
	for _, s := range series {
		for _, v := range s.Values {
			top = max(top, v)
		}
	}
	c.Max, c.Empty = maxLabel(top), top == 0
	if len(days) == 0 || len(series) == 0 || top == 0 {
		return c
	}
	slot := float64(chartWidth) / float64(len(days))
	barW := slot * (1 - chartGap) / float64(len(series))
	usable := float64(c.Baseline - chartTop)
	for d, day := range days {
		for i, s := range series {
			v := s.Values[d]
			if v <= 0 {
				continue
			}
			h := float64(v) / float64(top) * usable
			h = max(h, 1) // a non-zero day stays visible
			x := float64(d)*slot + slot*chartGap/2 + float64(i)*barW
			c.Bars = append(c.Bars, ChartBar{
				X: svgNum(x), Y: svgNum(float64(c.Baseline) - h), W: svgNum(barW), H: svgNum(h),
				Class: s.Class, Tip: day + " · " + s.Name + ": " + s.Labels[d],
			})
		}
	}
	return c
}

// svgNum formats a coordinate with two decimals at most.
func svgNum(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) }
