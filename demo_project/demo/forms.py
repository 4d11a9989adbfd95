from django import forms


class PrimeForm(forms.Form):
    limit = forms.IntegerField(min_value=2, max_value=5_000_000, initial=200_000)
